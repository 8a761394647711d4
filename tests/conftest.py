import os

import pytest
from hypothesis import HealthCheck, settings

from gpupool.server.settings import Settings
from tests.support.browser import browser  # noqa: F401 (a fixture for the browser tests)
from tests.support.kube_fixtures import control_plane, kube, start_scheduler  # noqa: F401
from tests.support.live import live_server
from tests.support.postgres import PostgresServer
from tests.support.tenants import work_root  # noqa: F401 (a fixture for root-agent tests)

pytest_plugins = ["tests.support.tiers"]  # unit, integration, e2e: by folder, and kept honest

# Bounded by default so the suite stays fast; HYPOTHESIS_PROFILE=deep runs many more examples.
settings.register_profile(
    "bounded", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "deep", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "bounded"))


@pytest.fixture(autouse=True, scope="session")
def client_config(tmp_path_factory):
    """The CLI's profiles and its outputs spool (``gpupool.cli.deliver``) in a folder of the
    run's own, never in the home of whoever runs the suite; the deliverer that sbatch started
    for the run's jobs is stopped with it (its servers are gone)."""
    if os.environ.get("GPUPOOL_CONFIG_DIR"):
        yield
        return
    folder = tmp_path_factory.mktemp("client-config")
    os.environ["GPUPOOL_CONFIG_DIR"] = str(folder)
    try:
        yield
    finally:
        os.environ.pop("GPUPOOL_CONFIG_DIR", None)
        stop_deliverer(folder / "outputs")


def stop_deliverer(spool) -> None:
    import signal

    try:
        pid = int((spool / "deliver.pid").read_text())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"gpupool.cli.deliver" in f.read():
                os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        pass  # none runs


@pytest.fixture(scope="session")
def postgres():
    server = PostgresServer.start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path):
    """A fresh, empty database on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'gpupool.db'}"
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture
def server(database_url, tmp_path):
    settings = Settings(data_dir=tmp_path, database_url=database_url, log_json=False)
    with live_server(settings) as live:
        yield live


@pytest.fixture
def sqlite_server(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False)
    with live_server(settings) as live:
        yield live

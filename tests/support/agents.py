"""Agents for the tests: in a thread of the test process, or as a real ``gpupool agent``
process that can be killed with SIGKILL."""

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from gpupool.agent import Agent, AgentConfig
from gpupool.agent import processes as proc
from gpupool.agent.replica_watch import control_of
from gpupool.agent.state import Store
from gpupool.agent.workloads import IsolationConfig

if TYPE_CHECKING:
    from tests.support.live import LiveServer

# tests of other things run workloads as the test's own user (their commands use this venv's
# Python, which other users may not be able to run); tests/e2e/hostile/test_isolation.py runs
# tenant users
AS_AGENT_USER = IsolationConfig(mode="none")
FAST = {"sync_s": 0.1, "heartbeat_s": 0.3, "grace_s": 2.0, "isolation": AS_AGENT_USER}


@contextmanager
def agent_thread(agent: Agent) -> Iterator[Agent]:
    stop = threading.Event()
    t = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    t.start()
    try:
        yield agent
    finally:
        stop.set()
        t.join(timeout=30)


@contextmanager
def two_teams_and_a_node(
    tmp: Path,
    isolation: IsolationConfig | None = None,
    devices: str = "simulated:4xA100-80G",
    **settings: object,
) -> Iterator["LiveServer"]:
    """A server with its scheduler loop (cycles every 0.2 s), top-level tenants algo and beta
    with 2 guaranteed cards each, and node n1 with ``devices`` (4 simulated A100-80G) run by
    an agent in a thread (workloads as the agent's user unless ``isolation`` says)."""
    from gpupool.server.settings import Settings
    from tests.support.cluster import ok
    from tests.support.live import live_server

    config = Settings(data_dir=tmp, log_json=False, cycle_interval_s=0.2, **settings)
    with live_server(config, run_scheduler=True) as srv:
        admin = srv.admin()
        for tenant in ("algo", "beta"):
            ok(admin.post("/api/v1/tenants", json={"name": tenant}), 201)
            quota = {"resource": "gpu", "nominal": 2}
            ok(admin.put(f"/api/v1/tenants/{tenant}/quotas/gpu", json=quota))
        token = srv.token("agent-n1", "agent", node="n1")
        extra = {"isolation": isolation} if isolation is not None else {}
        agent = make_agent(srv.url, token, "n1", tmp / "agent", devices=devices, **extra)
        with agent_thread(agent):
            wait_for("registration", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
            yield srv


def control_address(agents: list[Agent], job_id: int) -> str:
    """Where a replica's control endpoints answer (its agent alone reaches them: the tests,
    as that agent's process or root, stand in for it)."""
    for agent in agents:
        for rec in list(agent.records.values()):
            if rec.job_id == job_id and control_of(rec):
                return str(control_of(rec))
    raise AssertionError(f"no agent runs a replica of job {job_id}")


def make_agent(url: str, token: str, name: str, state_dir: Path, **extra) -> Agent:
    config = {"devices": "simulated:2xA100-80G", **FAST, **extra}
    return Agent(AgentConfig(server=url, token=token, name=name, state_dir=state_dir, **config))


@pytest.fixture(autouse=True)
def no_workload_outlives_its_test(tmp_path: Path) -> Iterator[None]:
    """Agents leave workloads running when they stop (restart safety): kill what a test left.
    Import it into a test module to have it there."""
    yield
    for pgid in workload_groups(tmp_path):
        proc.signal_group(pgid, proc.KILL)


def workload_groups(root: Path) -> set[int]:
    """Process groups of every workload recorded by the agents whose state lies under root.
    The walk does not enter the workloads folders: live agents remove finished workloads'
    folders while it runs (a recursive glob raised FileNotFoundError on one)."""
    groups: set[int] = set()
    for folder, children, _ in os.walk(root):
        if "workloads" in children:
            children.remove("workloads")
            groups |= {record.pid for record in Store(Path(folder)).load_all().values()}
    return groups


def agent_process(
    url: str, token: str, name: str, state_dir: Path, *extra: str
) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "gpupool.cli.main", "agent", "--server", url, "--name", name]
    cmd += ["--devices", "simulated:2xA100-80G", "--state-dir", str(state_dir)]
    cmd += ["--heartbeat", "0.3", "--grace", "2", *(extra or ("--isolation", "none"))]
    log = (state_dir.parent / f"{name}-agent.log").open("a")
    return subprocess.Popen(
        cmd, env={**os.environ, "GPUPOOL_AGENT_TOKEN": token}, stdout=log, stderr=log
    )


def kill9(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)


def printing_env(variable: str, seconds: int = 30) -> list[str]:
    """A workload that prints ``variable`` of its environment, then lives ``seconds``."""
    code = f"import os, time; print(os.environ[{variable!r}], flush=True); time.sleep({seconds})"
    return ["python3", "-c", code]


def wait_for(what: str, check: Callable[[], object], timeout: float = 20) -> object:
    """Poll ``check`` until it returns something truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def a_job_runs_over_the_channel(client: httpx.Client, agent: Agent, tenant: str) -> dict:
    """With ``agent`` running: its channel comes up, and a one-card job of ``tenant`` runs to
    its end; the finished job."""
    wait_for("its channel", lambda: agent.channel and agent.channel.up.is_set())
    body = {"request": "gpu=1", "tenant": tenant, "command": ["true"]}
    job = client.post("/api/v1/jobs", json=body).json()
    done = wait_for(
        "the job",
        lambda: (j := client.get(f"/api/v1/jobs/{job['id']}").json())["finished_at"] and j,
        30,
    )
    assert isinstance(done, dict)
    return done


def job_state(client: httpx.Client, job_id: int) -> dict:
    return client.get(f"/api/v1/jobs/{job_id}").json()


def in_state(client: httpx.Client, job_id: int, *states: str) -> Callable[[], dict | None]:
    def check() -> dict | None:
        job = job_state(client, job_id)
        return job if job["state"] in states else None

    return check


STAND_IN_DOCKER = """#!/bin/sh
here="$(dirname "$0")"
printf "%s\\n" "$@" > "$here/args"
env > "$here/client-env"
while [ "$1" != "--" ]; do
  [ "$1" = "--env-file" ] && cp "$2" "$here/env-file"
  shift
done
shift 2
exec "$@"
"""


def stand_in_docker(folder: Path, run: bool = True) -> IsolationConfig:
    """An agent configuration whose container runtime is a stand-in in ``folder`` (no docker
    daemon here): it records its argv (``args``), its environment (``client-env``) and the
    env file (``env-file``), then runs the command after the image unless ``run`` is False."""
    folder.mkdir()
    fake = folder / "docker"
    fake.write_text(STAND_IN_DOCKER if run else STAND_IN_DOCKER.replace('exec "$@"', "exit 0"))
    fake.chmod(0o755)
    return IsolationConfig(mode="none", container_runtime=str(fake))


def _gpupool_namespaces() -> set[str]:
    folder = Path("/run/netns")
    return {p.name for p in folder.glob("gpupool-*")} if folder.is_dir() else set()


def _gpupool_tables() -> set[str]:
    try:
        out = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    except OSError:  # no nft here
        return set()
    return {line.split()[-1] for line in out.splitlines() if " gpupool-" in line}


@pytest.fixture
def no_namespace_outlives_its_test() -> Iterator[None]:
    """Tenant network namespaces and nftables tables a test's agents made (a killed agent
    leaves its own, as a real node's agent keeps them for its running workloads): deleted
    after the test."""
    before, tables = _gpupool_namespaces(), _gpupool_tables()
    yield
    for name in _gpupool_namespaces() - before:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", f"gpn-{name[8:18]}"], capture_output=True)
    for table in _gpupool_tables() - tables:
        subprocess.run(["nft", "delete", "table", "ip", table], capture_output=True)


def skip_module_unless_root(why: str) -> None:
    """At a module's top: skip it without root (an error where ``GPUPOOL_REQUIRE_ROOT`` says
    root is there, as in CI)."""
    if os.geteuid() != 0:
        if os.environ.get("GPUPOOL_REQUIRE_ROOT"):
            raise RuntimeError("these tests need root (CI runs them as root)")
        pytest.skip(why, allow_module_level=True)


def skip_unless_nft() -> None:
    """Skip without nftables (the wall between tenants' namespaces, replicas' published
    ports), saying what to install; an error where ``GPUPOOL_REQUIRE_ROOT`` says CI has it."""
    import shutil

    if shutil.which("nft") is None:
        if os.environ.get("GPUPOOL_REQUIRE_ROOT"):
            raise RuntimeError("nft is missing (CI installs nftables)")
        pytest.skip("nftables is not installed (apt-get install nftables)")


def wait_for_cards(admin: httpx.Client, node: str = "n1") -> None:
    """Until the node's agent has registered its cards (a job submitted before is refused as
    never runnable)."""

    def cards() -> bool:
        r = admin.get(f"/api/v1/nodes/{node}")
        return r.status_code == 200 and bool(r.json()["devices"])

    wait_for("registration", cards)


@contextmanager
def partitioned(agent: Agent) -> Iterator[None]:
    """A network partition for ``agent``, alive but unheard: none of its HTTP calls get
    through and its channel (if open) is cut and cannot reconnect, until the block ends."""
    from gpupool.agent.api import AgentApiError

    real_call = agent.api._call

    def unreachable(*_args, **_kwargs):
        raise AgentApiError("ConnectError: network unreachable (test partition)")

    agent.api._call = unreachable
    channel = agent.channel
    real_server = channel._server if channel is not None else None
    if channel is not None:
        channel._server = lambda: "http://127.0.0.1:9"  # port 9 (discard): refused
        ws = channel._ws
        if ws is not None:
            ws.close()
    try:
        yield
    finally:
        agent.api._call = real_call  # the network is back
        if channel is not None and real_server is not None:
            channel._server = real_server

"""Schemathesis against our own OpenAPI on a live loopback server: whatever the schema
allows (and a little it does not), the server answers without a 5xx, and every 4xx is JSON
that says what is wrong. Bounded: a few examples per operation."""

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from gpupool.server.settings import Settings
from tests.support.cluster import ok, seed_cluster, submit
from tests.support.live import live_server

EXAMPLES = 20


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def live(request, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("fuzz")
    url = "" if request.param == "sqlite" else request.getfixturevalue("postgres").new_database()
    settings_ = Settings(data_dir=data_dir, database_url=url, log_json=False)
    with live_server(settings_) as server:
        admin = server.admin()
        seed_cluster(admin, nodes=2)
        job = submit(admin, "gpu=1", "algo")
        server.cycle()
        ok(admin.get(f"/api/v1/jobs/{job['id']}"))
        yield server


def _operations(live):
    schema = schemathesis.openapi.from_url(live.url + "/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def test_no_server_errors(live):
    """One Hypothesis run per operation (schemathesis' pytest plugin does not load under the
    pytest we pin, so operations are driven directly)."""
    auth = {"Authorization": f"Bearer {live.admin_token}"}
    operations = _operations(live)
    assert len(operations) >= 30

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
        def check(case):
            response = case.call(headers=auth, timeout=30)
            where = f"{case.method} {case.formatted_path}"
            assert response.status_code < 500, (where, response.text)
            if response.status_code >= 400:
                body = response.json()
                assert isinstance(body.get("detail"), str) and body["detail"], (where, body)

        check()

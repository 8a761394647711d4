"""Start-time estimates in the server (issue 64): the leader's plan, stored, in the API,
``gpupool queue --start`` and ``job show`` — exact on a constructed queue."""

import time
from datetime import datetime

import pytest
from sqlalchemy import select

from gpupool.server.db.tables import StartEstimateRow
from gpupool.server.settings import Settings
from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster, started, submit
from tests.support.live import live_server


@pytest.fixture
def srv(database_url, tmp_path):
    settings = Settings(data_dir=tmp_path, database_url=database_url, log_json=False)
    with live_server(settings) as live:
        yield live


def _env(srv) -> dict[str, str]:
    return {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token, "TZ": "UTC"}


def test_a_job_behind_a_time_limited_job_is_expected_at_its_end(srv):
    admin = srv.admin()
    seed_cluster(admin, nodes=1, cards=2, tenants={"algo": 2})
    now = time.time()
    first = submit(admin, "gpu=2", "algo", max_runtime_s=3600)
    srv.cycle(now - 600)  # running for ten minutes, an hour's limit
    alloc = started(admin, first)
    behind = submit(admin, "gpu=2", "algo", name="behind")
    never = submit(admin, "gpu=2", "algo", name="never")  # behind a job without a limit: no time
    srv.cycle(now)
    at = time.time()  # after the submissions (an estimate older than its wait is not shown)
    plan = srv.ctx.loop.estimate_starts(at)
    assert plan is not None
    end = alloc["created_at"] + 3600
    shown = ok(admin.get(f"/api/v1/jobs/{behind['id']}"))["estimate"]
    assert shown == {"start": end, "nodes": ["n0"], "basis": "from time limits",
                     "computed_at": at}  # fmt: skip
    assert ok(admin.get(f"/api/v1/jobs/{never['id']}"))["estimate"]["start"] is None
    assert ok(admin.get(f"/api/v1/jobs/{first['id']}"))["estimate"] is None  # runs
    queued = {q["id"]: q for q in ok(admin.get("/api/v1/queue"))["items"]}
    assert queued[behind["id"]]["estimate"]["start"] == end

    r = gpupool("queue", "--start", env=_env(srv))
    assert r.returncode == 0, r.stderr
    header, *lines = r.stdout.splitlines()
    assert header.split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "START_TIME",
                              "NODES", "SCHEDNODES", "NODELIST(REASON)"]  # fmt: skip
    mine = next(line for line in lines if line.split()[0] == str(behind["id"]))
    expected = datetime.fromtimestamp(end).strftime("%Y-%m-%dT%H:%M:%S")
    assert mine.split()[4:7] == ["PD", expected, "1"] and mine.split()[7] == "n0"
    other = next(line for line in lines if line.split()[0] == str(never["id"]))
    assert other.split()[5:8] == ["N/A", "1", "(null)"]
    assert all(line.split()[0] != str(first["id"]) for line in lines)  # pending only

    r = gpupool("job", "show", str(behind["id"]), env=_env(srv))
    assert r.returncode == 0, r.stderr
    local = datetime.fromtimestamp(end).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    assert f"{local} +0000 on n0 (from time limits)" in r.stdout

    r = gpupool("queue", "--start", "--state", "running", env=_env(srv))
    assert r.returncode != 0 and "not with --state" in r.stderr
    r = gpupool("queue", "--start", "--json", env=_env(srv))
    assert r.returncode != 0 and "--json: not with --start" in r.stderr


def test_a_new_plan_replaces_the_last_and_a_started_job_keeps_none(srv):
    admin = srv.admin()
    seed_cluster(admin, nodes=1, cards=2, tenants={"algo": 2})
    now = time.time()
    first = submit(admin, "gpu=2", "algo", max_runtime_s=600)
    srv.cycle(now)
    behind = submit(admin, "gpu=2", "algo")
    srv.ctx.loop.estimate_starts(time.time())
    assert ok(admin.get(f"/api/v1/jobs/{behind['id']}"))["estimate"]["start"] is not None
    ok(admin.post(f"/api/v1/jobs/{first['id']}/cancel"))
    srv.cycle(now + 1)  # the one behind starts
    assert ok(admin.get(f"/api/v1/jobs/{behind['id']}"))["state"] == "admitted"
    assert ok(admin.get(f"/api/v1/jobs/{behind['id']}"))["estimate"] is None
    srv.ctx.loop.estimate_starts(time.time())
    with srv.ctx.db.read() as s:
        assert s.execute(select(StartEstimateRow)).scalars().all() == []

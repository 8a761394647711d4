"""``gpupool acct`` and ``gpupool usage`` against a live server: the figures they print are
the usage records' own, summed per job and per tenant and model."""

import csv
import io
import json
import time
from datetime import datetime

from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster, started, submit


def test_acct_and_usage_equal_the_usage_records(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4, "dev": 2})
    jobs = [submit(admin, spec, tenant) for spec, tenant in
            (("gpu=1,cpu=2", "algo"), ("gpu=2", "algo"), ("cpu=4", "dev"))]  # fmt: skip
    sqlite_server.cycle()
    for j in jobs:
        started(admin, j)
    time.sleep(1.2)
    for j in jobs:
        ok(admin.post(f"/api/v1/jobs/{j['id']}/cancel"))
    records = admin.get("/api/v1/usage", params={"limit": 1000}).json()["items"]
    assert records
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    out = gpupool("acct", "--json", env=env)
    assert out.returncode == 0, out.stderr
    rows = {r["id"]: r for r in json.loads(out.stdout)}
    assert set(rows) == {j["id"] for j in jobs}
    for j in jobs:
        mine = [u for u in records if u["job_id"] == j["id"]]
        cards = sum(u["compute_pct_seconds"] for u in mine if u["model"] != "cpu") / 100 / 3600
        cpu = sum(u["cpu_milli_seconds"] for u in mine) / 1000 / 3600
        assert rows[j["id"]]["card_hours"] == round(cards, 4)
        assert rows[j["id"]]["cpu_hours"] == round(cpu, 4)
        assert rows[j["id"]]["state"] == "cancelled" and rows[j["id"]]["user"] == "root"
    assert rows[jobs[1]["id"]]["card_hours"] > rows[jobs[0]["id"]]["card_hours"] > 0  # 2 vs 1
    assert rows[jobs[2]["id"]]["card_hours"] == 0 and rows[jobs[2]["id"]]["cpu_hours"] > 0
    table = gpupool("acct", "--csv", "-o", "id,tenant,card_hours", "--tenant", "dev", env=env)
    parsed = list(csv.reader(io.StringIO(table.stdout)))
    assert parsed == [["id", "tenant", "card_hours"], [str(jobs[2]["id"]), "dev", "0.00"]]
    future = gpupool("acct", "--since", "now+1h", "--until", "now+2h", "--json", env=env)
    assert json.loads(future.stdout) == []
    for bad, needle in ((["-o", "id,bogus"], "unknown column 'bogus'"),
                        (["--since", "yesterday"], "neither now"),
                        (["--state", "running"], "not one of succeeded")):  # fmt: skip
        r = gpupool("acct", *bad, env=env)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr
    month = datetime.now().astimezone().strftime("%Y-%m")
    summary = gpupool("usage", "--month", month, "--json", env=env)
    assert summary.returncode == 0, summary.stderr
    items = json.loads(summary.stdout)["items"]
    algo = sum(i["card_hours"] for i in items if i["tenant"] == "algo")
    want = sum(u["compute_pct_seconds"] for u in records if u["tenant"] == "algo") / 100 / 3600
    assert abs(algo - want) < 1e-3
    assert gpupool("usage", "--month", "2026-13", env=env).returncode == 2


def test_plain_usage_includes_running_jobs(sqlite_server):
    """``gpupool usage`` (until now) counts what running jobs used so far, as its help says:
    the client's "now" is a moment before the server's and used to leave them out."""
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    job = submit(admin, "gpu=2", "algo")
    sqlite_server.cycle(time.time() - 1800)  # running for half an hour, nothing metered yet
    started(admin, job)
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    for argv in ([], ["--since", "now-1h"]):
        out = gpupool("usage", *argv, "--json", env=env)
        assert out.returncode == 0, out.stderr
        (row,) = json.loads(out.stdout)["items"]
        assert row["tenant"] == "algo" and 0.99 < row["card_hours"] < 1.01, row  # 2 x 0.5 h
    past = gpupool("usage", "--since", "now-3h", "--until", "now-2h", "--json", env=env)
    assert json.loads(past.stdout)["items"] == []  # before it started: nothing

"""``gpupool tenant idle-policy`` and ``gpupool sessions`` against a real server: a rule set
for one class, the tree's rule shown with who set it, --off and --clear, options that do not
go together refused in words, and the sessions list with its idle columns."""

import json

from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster


def test_idle_policies_are_set_and_shown_from_the_command_line(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"org": 2})
    ok(admin.post("/api/v1/tenants", json={"name": "lab", "parent": "org"}), 201)
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}

    r = gpupool("tenant", "idle-policy", "org", "--timeout", "2h", "--warning", "10m", env=env)
    assert r.returncode == 0, r.stderr
    r = gpupool("tenant", "idle-policy", "lab", "--class", "dev-test", "--timeout", "30m",
                "--json", env=env)  # fmt: skip
    out = json.loads(r.stdout)
    assert out["own"] == {"dev-test": {"timeout_s": 1800, "warning_s": 600}}
    by_class = {x["priority_class"]: x for x in out["in_force"]}
    assert (by_class["dev-test"]["set_by"], by_class["dev-test"]["timeout_s"]) == ("lab", 1800)
    assert (by_class["training"]["set_by"], by_class["training"]["timeout_s"]) == ("org", 7200)
    table = gpupool("tenant", "idle-policy", "lab", env=env).stdout
    assert "org (any class)" in table and "1800 s" in table, table

    r = gpupool("tenant", "idle-policy", "lab", "--class", "training", "--off", "--json", env=env)
    assert json.loads(r.stdout)["own"]["training"] == {"timeout_s": 0, "warning_s": 0}
    r = gpupool("tenant", "idle-policy", "lab", "--class", "dev-test", "--clear", "--json",
                env=env)  # fmt: skip
    assert set(json.loads(r.stdout)["own"]) == {"training"}

    r = gpupool("tenant", "idle-policy", "lab", "--off", "--timeout", "1h", env=env)
    assert r.returncode == 2 and "give one of --timeout, --off, --clear" in r.stderr
    r = gpupool("tenant", "idle-policy", "lab", "--timeout", "10m", "--warning", "1h", env=env)
    assert r.returncode == 2 and "warning_s (3600) must be below timeout_s (600)" in r.stderr
    r = gpupool("tenant", "idle-policy", "lab", "--class", "nope", "--timeout", "1h", env=env)
    assert r.returncode == 2 and "unknown priority class 'nope'" in r.stderr

    assert "no running sessions" in gpupool("sessions", env=env).stdout
    body = {"request": "gpu=1", "tenant": "lab", "allocation": True, "max_runtime_s": 600}
    job = ok(admin.post("/api/v1/jobs", json=body), 201)
    sqlite_server.cycle()
    listed = gpupool("sessions", env=env).stdout
    assert f"{job['id']}       lab" in listed and "dev-test" in listed, listed
    [row] = json.loads(gpupool("sessions", "--json", env=env).stdout)
    assert row["started_at"] is None and row["idle_s"] == 0  # granted, its workload not started
    assert row["idle_timeout_s"] == 7200 and row["policy_from"] == "tenant org (any class)"

"""Everyday administration from the command line against a live server on loopback: tenants,
users and tokens (expiring, disabled), quotas, draining nodes, reservations; every failure
is one line and exit code 2."""

import json
import time
from datetime import UTC, datetime

from tests.support.cli import gpupool
from tests.support.cluster import node_body, ok


def _as(server, token: str | None = None) -> dict[str, str]:
    return {"GPUPOOL_SERVER": server.url, "GPUPOOL_TOKEN": token or server.admin_token}


def _run(env, *args: str):
    out = gpupool(*args, env=env)
    assert "Traceback" not in out.stderr, out.stderr
    return out


def test_tenants_users_tokens_and_quotas(sqlite_server):
    env = _as(sqlite_server)
    assert _run(env, "tenant", "create", "research").returncode == 0
    out = _run(env, "tenant", "create", "vision", "--parent", "research")
    assert out.returncode == 0 and "tenant vision created under research" in out.stdout
    out = _run(env, "quota", "set", "vision", "gpu", "--nominal", "8", "--borrowing-limit", "4")
    assert out.returncode == 0
    assert "vision gpu: nominal 8, borrowing limit 4, lending limit none" in out.stdout
    shown = json.loads(_run(env, "tenant", "show", "vision", "--json").stdout)
    assert shown["quotas"][0]["nominal"] == 8 and shown["parent"] == "research"
    out = _run(env, "user", "create", "ann", "--role", "member", "--tenant", "vision",
               "--expires", "2h")  # fmt: skip
    assert out.returncode == 0 and "user ann (member, expires " in out.stdout
    ann_token = out.stdout.split()[-1]
    ann = _as(sqlite_server, ann_token)
    mine = _run(ann, "token", "create", "--user", "ann", "--json")
    assert mine.returncode == 0
    made = json.loads(mine.stdout)
    assert made["expires_at"] is not None and made["expires_at"] <= time.time() + 2 * 3600 + 5
    too_long = _run(ann, "token", "create", "--user", "ann", "--expires", "30d")
    assert too_long.returncode == 2 and "may not outlive" in too_long.stderr
    tokens = json.loads(_run(ann, "token", "list", "--json").stdout)
    assert {t["user"] for t in tokens} == {"ann"} and len(tokens) == 2
    listed = _run(env, "user", "list")
    assert listed.returncode == 0 and "ann" in listed.stdout and "active" in listed.stdout
    assert _run(env, "user", "disable", "ann").returncode == 0
    refused = _run(ann, "tenant", "show", "vision")
    assert refused.returncode == 2 and "disabled" in refused.stderr
    assert _run(env, "user", "enable", "ann").returncode == 0
    assert _run(ann, "tenant", "show", "vision").returncode == 0
    revoke = _run(env, "token", "revoke", str(made["id"]))
    assert revoke.returncode == 0
    gone = _run(_as(sqlite_server, made["token"]), "token", "list")
    assert gone.returncode == 2 and "401" in gone.stderr
    assert _run(env, "quota", "delete", "vision", "gpu").returncode == 0
    shown = json.loads(_run(env, "tenant", "show", "vision", "--json").stdout)
    assert shown["quotas"] == []
    in_use = _run(env, "tenant", "delete", "research")  # it still has a sub-tenant
    assert in_use.returncode == 2 and in_use.stderr.count("\n") == 1
    bad = _run(env, "user", "create", "x", "--role", "member", "--tenant", "vision",
               "--expires", "soon")  # fmt: skip
    assert bad.returncode == 2 and "neither now, a duration" in bad.stderr


def test_drain_resume_and_reservations(sqlite_server):
    env = _as(sqlite_server)
    admin = sqlite_server.admin()
    for name in ("n1", "n2"):
        ok(admin.post("/api/v1/nodes", json=node_body(name)))
    assert _run(env, "tenant", "create", "algo").returncode == 0
    assert _run(env, "tenant", "create", "infer").returncode == 0
    out = _run(env, "node", "drain", "n1")
    assert out.returncode == 0 and "running jobs finish" in out.stdout
    assert admin.get("/api/v1/nodes/n1").json()["schedulable"] is False
    assert _run(env, "node", "resume", "n1").returncode == 0
    assert admin.get("/api/v1/nodes/n1").json()["schedulable"] is True
    out = _run(env, "reservation", "create", "--tenant", "algo", "--nodes", "n1,n2",
               "--start", "1h", "--end", "1d")  # fmt: skip
    assert out.returncode == 0 and out.stdout.startswith("reservation 1: n1, n2 for algo from ")
    clash = _run(env, "reservation", "create", "--tenant", "infer", "--nodes", "n2",
                 "--start", "2h", "--end", "3h")  # fmt: skip
    assert clash.returncode == 2 and "n2 is reserved by r-1 of algo" in clash.stderr
    past = _run(env, "reservation", "create", "--tenant", "infer", "--nodes", "n2",
                "--start", "2020-01-01", "--end", "2020-01-02")  # fmt: skip
    assert past.returncode == 2 and "in the past" in past.stderr
    listed = _run(env, "reservation", "list")
    assert listed.returncode == 0 and "algo" in listed.stdout and "n1, n2" in listed.stdout
    assert _run(env, "reservation", "delete", "1").returncode == 0
    assert json.loads(_run(env, "reservation", "list", "--json").stdout) == []


def test_quota_set_changes_only_what_it_is_given_and_says_what_it_overbooks(sqlite_server):
    env = _as(sqlite_server)
    ok(sqlite_server.admin().post("/api/v1/nodes", json=node_body("n1", cards=4)))
    for name, parent in (("org", None), ("a", "org"), ("b", "org")):
        args = ["tenant", "create", name] + (["--parent", parent] if parent else [])
        assert _run(env, *args).returncode == 0
    quiet = _run(env, "quota", "set", "org", "gpu", "--nominal", "4")
    assert quiet.returncode == 0 and quiet.stderr == ""
    _run(env, "quota", "set", "a", "gpu", "--nominal", "3", "--borrowing-limit", "1")
    over = _run(env, "quota", "set", "b", "gpu", "--nominal", "2")
    assert over.returncode == 0
    assert over.stderr == (
        "warning: gpu: guarantees a 3 cards + b 2 cards = 5 cards exceed org's guarantee "
        "of 4 cards\n"
    )
    cap = _run(env, "quota", "set", "a", "gpu", "--borrowing-limit", "2")
    assert "a gpu: nominal 3, borrowing limit 2, lending limit none" in cap.stdout
    lend = _run(env, "quota", "set", "a", "gpu", "--lending-limit", "1")
    assert "a gpu: nominal 3, borrowing limit 2, lending limit 1" in lend.stdout
    anyone = _run(env, "quota", "set", "a", "gpu", "--borrowing-limit", "none")
    assert "borrowing limit none (any idle capacity), lending limit 1" in anyone.stdout
    pool = _run(env, "quota", "set", "org", "gpu", "--nominal", "6")
    assert "warning: gpu: guarantees org 6 cards = 6 cards exceed the pool's 4 cards" in pool.stderr
    new = _run(env, "quota", "set", "b", "cpu", "--borrowing-limit", "1")
    assert new.returncode == 2 and "b has no cpu quota yet: give --nominal" in new.stderr
    bad = _run(env, "quota", "set", "a", "gpu", "--borrowing-limit", "lots")
    assert (
        bad.returncode == 2 and "--borrowing-limit: 'lots' is not a number or 'none'" in bad.stderr
    )


def test_times_typed_without_a_zone_are_in_the_users_zone_and_said_with_it(sqlite_server):
    """With TZ=Asia/Shanghai a reservation typed 09:00-18:00 was taken as UTC and echoed as
    17:00-02:00. Typed and shown times are the user's, and a sentence says the offset."""
    env = {**_as(sqlite_server), "TZ": "Asia/Shanghai"}
    ok(sqlite_server.admin().post("/api/v1/nodes", json=node_body("n1")))
    assert _run(env, "tenant", "create", "algo").returncode == 0
    out = _run(env, "reservation", "create", "--tenant", "algo", "--nodes", "n1",
               "--start", "2031-12-21T09:00", "--end", "2031-12-21T18:00")  # fmt: skip
    assert out.stdout.strip() == (
        "reservation 1: n1 for algo from 2031-12-21 09:00 +08:00 to 2031-12-21 18:00 +08:00"
    ), out.stdout + out.stderr
    stored = ok(sqlite_server.admin().get("/api/v1/reservations"))[0]
    assert stored["start"] == datetime(2031, 12, 21, 1, 0, tzinfo=UTC).timestamp()
    named = _run(env, "reservation", "create", "--tenant", "algo", "--nodes", "n1",
                 "--start", "2031-12-22T09:00Z", "--end", "2031-12-22T10:00+00:00")  # fmt: skip
    assert "from 2031-12-22 17:00 +08:00 to 2031-12-22 18:00 +08:00" in named.stdout
    listed = _run({**env, "COLUMNS": "100"}, "reservation", "list")
    assert "2031-12-21 09:00" in listed.stdout and "UTC+08:00" in listed.stdout
    help_ = _run(env, "reservation", "create", "--help")
    assert "in your zone" in help_.stdout


def test_a_reservation_says_what_it_will_stop_and_stops_it_when_it_begins(sqlite_server):
    srv = sqlite_server
    env = _as(srv)
    admin = srv.admin()
    ok(admin.post("/api/v1/nodes", json=node_body("n1", cards=4)))
    for name in ("algo", "infer"):
        assert _run(env, "tenant", "create", name).returncode == 0
    quota = {"resource": "gpu", "nominal": 2}
    for name in ("algo", "infer"):
        ok(admin.put(f"/api/v1/tenants/{name}/quotas/gpu", json=quota))
    body = {"request": "gpu=2", "tenant": "infer", "command": ["true"]}
    open_ended = ok(admin.post("/api/v1/jobs", json=body), 201)
    brief = ok(admin.post("/api/v1/jobs", json={**body, "max_runtime_s": 600}), 201)
    srv.cycle()
    out = _run(env, "reservation", "create", "--tenant", "algo", "--nodes", "n1",
               "--start", "2h", "--end", "1d")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == (  # not the brief one: it will have ended by then
        f"it will stop job(s) {open_ended['id']} when it begins (others' work on its nodes)"
    )
    assert brief["id"] != open_ended["id"]
    start = ok(admin.get("/api/v1/reservations"))[0]["start"]
    srv.cycle(now=start + 5)
    job = ok(admin.get(f"/api/v1/jobs/{open_ended['id']}"))
    assert job["state"] == "pending", job
    events = ok(admin.get(f"/api/v1/jobs/{open_ended['id']}/events"))
    assert events[-2]["to_state"] == "preempted"
    assert events[-2]["reason"].startswith("stopped for reservation r-1 of algo: its window")


def test_a_reservation_of_cards_holds_them_on_the_fewest_nodes_and_lends_the_rest(
    sqlite_server,
):
    """Issue 47: only whole nodes could be reserved. Six A100-80G cards for algo are held on
    the fewest nodes that have them (two of four cards each), packed; others' work takes the
    two cards beside the hold, a third waits saying why, and asking more cards than the nodes
    others leave free has is refused with the numbers."""
    srv = sqlite_server
    env = _as(srv)
    admin = srv.admin()
    for name in ("n1", "n2"):
        ok(admin.post("/api/v1/nodes", json=node_body(name, cards=4)))
    for name in ("algo", "infer"):
        assert _run(env, "tenant", "create", name).returncode == 0
        quota = {"resource": "gpu", "nominal": 6}
        ok(admin.put(f"/api/v1/tenants/{name}/quotas/gpu", json=quota))
    out = _run(env, "reservation", "create", "--tenant", "algo", "--cards", "A100-80G:6",
               "--end", "1d")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("reservation 1: 6 cards on n1, n2 for algo from ")
    listed = _run(env, "reservation", "list")
    assert "6 cards of n1, n2" in listed.stdout
    body = {"request": "gpu=1", "tenant": "infer", "command": ["sleep", "60"]}
    placed = [ok(admin.post("/api/v1/jobs", json=body), 201) for _ in range(3)]
    srv.cycle()
    states = [ok(admin.get(f"/api/v1/jobs/{j['id']}"))["state"] for j in placed]
    assert sorted(states) == ["admitted", "admitted", "pending"]  # no agent here runs them
    waiting = next(j for j, st in zip(placed, states, strict=True) if st == "pending")
    reason = ok(admin.get(f"/api/v1/jobs/{waiting['id']}"))["reason"]
    assert "6 cards of n1, n2 reserved by r-1 of algo until" in reason, reason
    assert "0 left beside them, this job takes 1" in reason
    ok(admin.post("/api/v1/nodes", json=node_body("n3", cards=4)))
    too_many = _run(env, "reservation", "create", "--tenant", "infer", "--cards", "A100-80G:5",
                    "--end", "1d")  # fmt: skip
    assert too_many.returncode == 2
    assert "5 A100-80G cards asked, 4 on nodes no other tenant holds then" in too_many.stderr
    unknown = _run(env, "reservation", "create", "--tenant", "infer", "--cards", "T4:1",
                   "--end", "1d")  # fmt: skip
    assert unknown.returncode == 2 and "no node has T4 cards" in unknown.stderr

"""Fair share over time and minimum run times in the server's own cycle (issue 64): a team
that borrowed much recently borrows after one that did not; a job younger than its class's
minimum run time is not reclaimed, until the claim has waited past the bound."""

import time

import httpx
import pytest

from gpupool.server.settings import Settings
from tests.support.cluster import ok, seed_cluster, started, submit
from tests.support.live import live_server


def _serve(database_url: str, tmp_path, **settings: object):
    return live_server(
        Settings(data_dir=tmp_path, database_url=database_url, log_json=False, **settings)
    )


def _org(admin: httpx.Client, **cards: float) -> None:
    """One node of two cards; teams under ``org`` with their guaranteed cards (siblings
    borrow what the others leave idle)."""
    seed_cluster(admin, nodes=1, cards=2, tenants={})
    ok(admin.post("/api/v1/tenants", json={"name": "org"}), 201)
    for name, n in cards.items():
        ok(admin.post("/api/v1/tenants", json={"name": name, "parent": "org"}), 201)
        quota = {"resource": "gpu", "nominal": n}
        ok(admin.put(f"/api/v1/tenants/{name}/quotas/gpu", json=quota))


def _agent(server, node: str) -> httpx.Client:
    return server.client(server.token(f"agent-{node}", "agent", node=node))


def _borrowed_yesterday(server, admin: httpx.Client, tenant: str, now: float) -> None:
    """``tenant`` borrowed both cards of n0 for ten hours, ending two hours ago (metered by
    the server from its agent's reports, as any run)."""
    job = submit(admin, "gpu=2", tenant)
    server.cycle(now - 12 * 3600)
    alloc = started(admin, job)
    assert alloc["borrowed"]
    body = {"generation": alloc["generation"], "state": "succeeded", "exit_code": 0,
            "ended_at": now - 2 * 3600, "node": "n0"}  # fmt: skip
    ok(_agent(server, "n0").post(f"/api/v1/allocations/{alloc['id']}/status", json=body))


@pytest.mark.parametrize("half_life_h", [168.0, 0.0])
def test_a_team_that_borrowed_much_recently_borrows_after_one_that_did_not(
    database_url, tmp_path, half_life_h
):
    """Both ask for the owner's two idle cards; ``a`` asks first and sorts first by name, so
    today's static rule (half-life 0) gives them to ``a``; fair share over time to ``b``."""
    with _serve(database_url, tmp_path, fairshare_half_life_h=half_life_h) as server:
        admin = server.admin()
        _org(admin, owner=2, a=0, b=0)
        now = time.time()
        _borrowed_yesterday(server, admin, "a", now)
        first = submit(admin, "gpu=2", "a")
        second = submit(admin, "gpu=2", "b")
        server.cycle(now)
        states = {t: ok(admin.get(f"/api/v1/jobs/{j['id']}"))["state"]
                  for t, j in (("a", first), ("b", second))}  # fmt: skip
        expected = {"a": "pending", "b": "admitted"} if half_life_h else {
            "a": "admitted", "b": "pending"}  # fmt: skip
        assert states == expected


def test_a_young_job_is_not_reclaimed_until_the_claim_waited_past_the_bound(database_url, tmp_path):
    with _serve(
        database_url, tmp_path, min_runtime_s={"training": 3600.0}, min_runtime_bound_s=600.0
    ) as server:
        admin = server.admin()
        _org(admin, owner=2, b=0)
        now = time.time()
        young = submit(admin, "gpu=2", "b", priority_class="training")
        server.cycle(now)
        started(admin, young)  # borrowed the owner's idle cards, running since now
        claim = submit(admin, "gpu=2", "owner", priority_class="training")
        server.cycle(now + 60)  # 1 minute old: protected, the owner's claim waits
        young_now = ok(admin.get(f"/api/v1/jobs/{young['id']}"))
        claim_now = ok(admin.get(f"/api/v1/jobs/{claim['id']}"))
        assert young_now["state"] == "running"
        assert claim_now["state"] == "pending" and claim_now["wait_code"] == "protected"
        assert "minimum run time" in claim_now["reason"]
        # the claim has waited past the 600 s bound: a guarantee takes the protected job
        server.cycle(claim_now["submit_time"] + 601)
        young_now = ok(admin.get(f"/api/v1/jobs/{young['id']}"))
        claim_now = ok(admin.get(f"/api/v1/jobs/{claim['id']}"))
        assert claim_now["state"] == "admitted"
        assert young_now["state"] == "pending"
        assert "minimum run time" in young_now["reason"], young_now["reason"]


def test_without_minimum_run_times_the_same_reclaim_is_at_once(database_url, tmp_path):
    """The control: default settings protect nothing."""
    with _serve(database_url, tmp_path) as server:
        admin = server.admin()
        _org(admin, owner=2, b=0)
        now = time.time()
        young = submit(admin, "gpu=2", "b", priority_class="training")
        server.cycle(now)
        started(admin, young)
        claim = submit(admin, "gpu=2", "owner", priority_class="training")
        server.cycle(now + 60)
        assert ok(admin.get(f"/api/v1/jobs/{claim['id']}"))["state"] == "admitted"
        assert ok(admin.get(f"/api/v1/jobs/{young['id']}"))["state"] == "pending"


def test_shares_and_priority_show_the_order_the_cycle_used(database_url, tmp_path):
    """sshare's and sprio's views of the same history: a (who borrowed) ranks after b, and
    b's pending job carries more fair-share points."""
    from tests.support.cli import gpupool

    with _serve(database_url, tmp_path, fairshare_half_life_h=168.0) as server:
        admin = server.admin()
        _org(admin, owner=2, a=0, b=0)
        now = time.time()
        _borrowed_yesterday(server, admin, "a", now)
        first = submit(admin, "gpu=2", "a")
        second = submit(admin, "gpu=2", "b")
        env = {"GPUPOOL_SERVER": server.url, "GPUPOOL_TOKEN": server.admin_token}
        r = gpupool("shares", "-P", env=env)
        assert r.returncode == 0, r.stderr
        header, *lines = r.stdout.splitlines()
        assert header == "Account|RawShares|NormShares|RawUsage|EffectvUsage|FairShare"
        rows = {line.split("|")[0]: line.split("|") for line in lines}
        assert list(rows) == ["org", "b", "owner", "a"]  # depth first; a (used) last
        # 2 cards x 10 h, aged 2 to 12 h with a 168 h half-life (decayed_card_hours)
        assert abs(float(rows["a"][3]) - 19.43) < 0.01 and float(rows["b"][3]) == 0
        assert float(rows["a"][5]) < float(rows["b"][5]) == 1.0
        r = gpupool("priority", env=env)
        assert r.returncode == 0, r.stderr
        header, _rule, *lines = r.stdout.splitlines()
        assert header.split() == ["JOBID", "PARTITION", "ACCOUNT", "USER", "PRIORITY", "AGE",
                                  "FAIRSHARE", "QOS", "NICE"]  # fmt: skip
        cells = {int(line.split()[0]): line.split() for line in lines}
        assert list(cells) == [second["id"], first["id"]]  # highest first
        assert int(cells[second["id"]][6]) == 10_000 > int(cells[first["id"]][6])
        assert cells[first["id"]][7] == "500000"  # training's 500 x 1000


def test_a_minimum_run_time_naming_no_class_or_tenant_is_said(tmp_path, caplog):
    settings = {"min_runtime_s": {"trainig": 600.0}, "min_runtime_tenant_s": {"nobody": 60.0}}
    with _serve(f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path, **settings) as server:
        _org(server.admin(), owner=2)
        with caplog.at_level("WARNING", logger="gpupool.scheduler"):
            server.cycle()
            server.cycle()
    said = [r.getMessage() for r in caplog.records if "minimum run times" in r.getMessage()]
    assert len(said) == 1, said  # once, not every cycle
    assert "min_runtime_s: no priority class 'trainig'" in said[0]
    assert "min_runtime_tenant_s: no tenant 'nobody'" in said[0]


def test_the_fair_share_view_is_read_once_for_every_caller_for_a_while(server, monkeypatch):
    """Review finding F5: each sshare/sprio call read every tenant's usage history, so a
    member's loop kept the API workers busy; one reading now serves all callers for
    ``FAIR_VIEW_TTL_S``."""
    from gpupool.server.routes import fairshare

    calls = []
    real = fairshare.fair_share_now

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fairshare, "fair_share_now", counted)
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"a": 1, "b": 1})
    member = server.client(server.token("ann", "member", "a"))
    for client in (admin, member, admin, member):
        ok(client.get("/api/v1/fairshare"))
        ok(client.get("/api/v1/priority"))
    assert len(calls) == 1
    server.ctx.fair_views.clear()
    ok(member.get("/api/v1/fairshare"))
    assert len(calls) == 2

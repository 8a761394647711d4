"""Guarantees promised more than once: a parent's children above it, the top of each branch
above the pool (through tenants without a guarantee: issue 59); the server warning through
the API and the CLI, and refusing them when told to."""

from gpupool.server.overbooking import overbooked
from gpupool.server.settings import Settings
from tests.support.cluster import node_body, ok
from tests.support.live import live_server

TREE = {"org": None, "lab": None, "a": "org", "b": "org", "a1": "a"}


def _shown(v: int) -> str:
    return f"{v}"


def test_each_level_is_checked_against_its_parent_and_the_top_against_the_pool():
    nominal = {"org": 10, "lab": 4, "a": 6, "b": 5, "a1": 7}
    assert overbooked("b", "gpu", TREE, nominal, 20, _shown) == [
        "gpu: guarantees a 6 + b 5 = 11 exceed org's guarantee of 10"
    ]
    assert overbooked("a", "gpu", TREE, nominal, 20, _shown) == [
        "gpu: guarantees a 6 + b 5 = 11 exceed org's guarantee of 10",
        "gpu: guarantees a1 7 = 7 exceed a's guarantee of 6",
    ]
    assert overbooked("lab", "gpu", TREE, nominal, 13, _shown) == [
        "gpu: guarantees lab 4 + org 10 = 14 exceed the pool's 13"
    ]
    assert overbooked("lab", "gpu", TREE, nominal, 14, _shown) == []


def test_a_parent_without_a_guarantee_of_the_resource_passes_its_childrens_up_to_the_pool():
    # org has no cpu guarantee: a's 99 counts against the pool (this said nothing before
    # issue 59: a parent without a guarantee bounded nothing, and the pool saw only org)
    assert overbooked("a", "cpu", TREE, {"a": 99, "a1": 5}, 100, _shown) == []
    assert overbooked("a", "cpu", TREE, {"a": 99, "a1": 5}, 50, _shown) == [
        "cpu: guarantees a 99 = 99 exceed the pool's 50"
    ]


def test_the_server_refuses_overbooking_when_set_to_and_keeps_the_old_quota(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, quota_overbooking="refuse")
    with live_server(settings) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/nodes", json=node_body("n1", cards=4)))
        ok(admin.post("/api/v1/tenants", json={"name": "t"}), 201)
        ok(admin.put("/api/v1/tenants/t/quotas/gpu", json={"resource": "gpu", "nominal": 4}))
        r = admin.put("/api/v1/tenants/t/quotas/gpu", json={"resource": "gpu", "nominal": 5})
        kept = ok(admin.get("/api/v1/tenants/t"))["quotas"][0]["nominal"]
    assert r.status_code == 409
    assert r.json()["detail"] == (
        "gpu: guarantees t 5 cards = 5 cards exceed the pool's 4 cards (quota_overbooking = refuse)"
    )
    assert kept == 4


def _seed_like(admin) -> None:
    """The seed of ``gpupool up``: 10 nodes x 4 cards, three teams under a company that has
    no quota of its own."""
    for i in range(10):
        ok(admin.post("/api/v1/nodes", json=node_body(f"node-{i + 1:02d}", cards=4)))
    ok(admin.post("/api/v1/tenants", json={"name": "company"}), 201)
    for team, cards in (("algorithm", 20), ("inference", 10), ("devtest", 10)):
        ok(admin.post("/api/v1/tenants", json={"name": team, "parent": "company"}), 201)
        ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu", json={"resource": "gpu",
                                                                  "nominal": cards}))  # fmt: skip


def test_guarantees_under_a_company_without_a_quota_are_checked_against_the_pool(tmp_path):
    """Issue 59, finding 2: guarantees of 48, then 90 cards on a 40-card pool drew no
    warning — the check looked at top-level tenants only."""
    from tests.support.cli import gpupool

    with live_server(Settings(data_dir=tmp_path, log_json=False)) as srv:
        admin = srv.admin()
        _seed_like(admin)
        assert ok(admin.get("/api/v1/overbooking"))["items"] == []
        got = ok(admin.put("/api/v1/tenants/algorithm/quotas/gpu",
                           json={"resource": "gpu", "nominal": 48}))  # fmt: skip
        assert got["warnings"] == [
            "gpu: guarantees algorithm 48 cards + devtest 10 cards + inference 10 cards = "
            "68 cards exceed the pool's 40 cards"
        ]
        env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}
        out = gpupool("quota", "set", "algorithm", "gpu", "--nominal", "90", env=env)
        assert out.returncode == 0, out.stderr
        assert out.stderr.strip() == (
            "warning: gpu: guarantees algorithm 90 cards + devtest 10 cards + inference 10 "
            "cards = 110 cards exceed the pool's 40 cards"
        )
        (level,) = ok(admin.get("/api/v1/overbooking"))["items"]
        assert level == {
            "resource": "gpu", "over": None, "limit": 40.0, "total": 110.0, "others": 0.0,
            "members": [{"tenant": "algorithm", "guarantee": 90.0},
                        {"tenant": "devtest", "guarantee": 10.0},
                        {"tenant": "inference", "guarantee": 10.0}],
            "message": out.stderr.strip().removeprefix("warning: "),
        }  # fmt: skip
        listed = gpupool("tenants", env=env)
        assert listed.returncode == 0 and level["message"] in listed.stderr
        # a member of inference sees the level it counts in, the others' guarantees summed
        member = srv.client(srv.token("ann", "member", "inference"))
        (seen,) = ok(member.get("/api/v1/overbooking"))["items"]
        assert seen["members"] == [{"tenant": "inference", "guarantee": 10.0}]
        assert seen["others"] == 100.0 and "algorithm" not in seen["message"]
        # a guarantee for the company bounds its teams there, and the pool bounds it
        got = ok(admin.put("/api/v1/tenants/company/quotas/gpu",
                           json={"resource": "gpu", "nominal": 40}))  # fmt: skip
        assert got["warnings"] == [
            "gpu: guarantees algorithm 90 cards + devtest 10 cards + inference 10 cards = "
            "110 cards exceed company's guarantee of 40 cards"
        ]
        # without the company's guarantee, its teams' count against the pool again: said
        out = gpupool("quota", "delete", "company", "gpu", env=env)
        assert out.returncode == 0 and out.stdout.strip() == "company gpu: quota removed"
        assert out.stderr.strip() == f"warning: {level['message']}"
        ok(admin.put("/api/v1/tenants/algorithm/quotas/gpu",
                     json={"resource": "gpu", "nominal": 20}))  # fmt: skip
        assert ok(admin.get("/api/v1/overbooking"))["items"] == []


def test_refuse_mode_refuses_overbooking_through_a_company_without_a_quota(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, quota_overbooking="refuse")
    with live_server(settings) as srv:
        admin = srv.admin()
        _seed_like(admin)
        r = admin.put("/api/v1/tenants/algorithm/quotas/gpu",
                      json={"resource": "gpu", "nominal": 48})  # fmt: skip
        assert r.status_code == 409, r.text
        assert "exceed the pool's 40 cards (quota_overbooking = refuse)" in r.json()["detail"]
        kept = ok(admin.get("/api/v1/tenants/algorithm"))["quotas"][0]["nominal"]
        assert kept == 20

"""Guarantees promised more than once (pure): a parent's children above it, the top level
above the pool; and the server refusing them when told to."""

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


def test_a_parent_without_a_guarantee_of_the_resource_bounds_nothing():
    assert overbooked("a", "cpu", TREE, {"a": 99, "a1": 5}, 0, _shown) == []


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

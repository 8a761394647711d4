"""Attacks on idle policies and the sessions list (docs/interactive.md, "Idle culling"), with
a real server on a socket: one tenant's tenant-admin or member cannot read or set another
tenant's idle policy (404, nothing said of it), nor loosen its own (403: its parent's
administrators set it), nor see another tenant's sessions; bad rules are refused naming what
is wrong; and another tenant's rule stays as its administrator set it."""

from tests.support.cluster import ok, seed_cluster

MARK = "bsecret"
RULE = {"timeout_s": 3600, "warning_s": 600}


def _policy(client, tenant: str, rules: dict):
    return client.put(f"/api/v1/tenants/{tenant}/idle-policy", json={"rules": rules})


def test_a_tenant_cannot_read_or_set_another_tenants_idle_policy_nor_loosen_its_own(
    sqlite_server,
):
    server = sqlite_server
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"a": 1, "b": 1})
    ok(admin.post("/api/v1/tenants", json={"name": "a-lab", "parent": "a"}), 201)
    ok(_policy(admin, "b", {"*": RULE}))
    b_before = ok(admin.get("/api/v1/tenants/b/idle-policy"))
    boss = server.client(server.token("boss-a", "tenant-admin", "a"))
    ann = server.client(server.token("ann-a", "member", "a"))
    off = {"*": {"timeout_s": 0, "warning_s": 0}}

    for client in (boss, ann):
        assert _policy(client, "b", off).status_code == 404  # b is not theirs to know of
        assert client.get("/api/v1/tenants/b/idle-policy").status_code == 404
    assert _policy(boss, "a", off).status_code == 403  # its own: its parent's to set
    assert _policy(ann, "a", off).status_code == 403
    assert _policy(ann, "a-lab", off).status_code == 403  # members set none
    set_below = ok(_policy(boss, "a-lab", {"dev-test": {"timeout_s": 1800, "warning_s": 300}}))
    assert set_below["own"] == {"dev-test": {"timeout_s": 1800, "warning_s": 300}}
    assert ok(admin.get("/api/v1/tenants/b/idle-policy")) == b_before

    # what the tenant-admin set below reads back with where each rule comes from
    lab = ok(ann.get("/api/v1/tenants/a-lab/idle-policy"))
    by_class = {r["priority_class"]: r for r in lab["in_force"]}
    assert by_class["dev-test"]["set_by"] == "a-lab" and by_class["dev-test"]["timeout_s"] == 1800
    assert by_class["training"]["set_by"] == "" and by_class["training"]["timeout_s"] == 0


def test_a_tenant_admin_cannot_escape_the_rule_above_through_a_sub_team(sqlite_server):
    """Review finding F3: the admin gives research a 1-hour rule; research's tenant-admin
    cannot change research itself, and must not get around it by creating a sub-team with a
    looser rule (0: never culled, or a longer timeout) — tighter is theirs to set."""
    server = sqlite_server
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"research": 1})
    ok(_policy(admin, "research", {"*": RULE}))
    boss = server.client(server.token("boss-r", "tenant-admin", "research"))
    ok(boss.post("/api/v1/tenants", json={"name": "research-escape", "parent": "research"}), 201)
    for rules in (
        {"*": {"timeout_s": 0, "warning_s": 0}},
        {"dev-test": {"timeout_s": 0, "warning_s": 0}},
        {"*": {"timeout_s": 7200, "warning_s": 600}},
    ):
        r = _policy(boss, "research-escape", rules)
        assert r.status_code == 422, (rules, r.text)
        assert "looser than the 3600 s idle timeout tenant research sets" in r.text, r.text
    assert ok(admin.get("/api/v1/tenants/research-escape/idle-policy"))["own"] == {}
    tighter = {"*": {"timeout_s": 1800, "warning_s": 300}}
    assert ok(_policy(boss, "research-escape", tighter))["own"] == tighter
    # an admin may loosen it (and is audited as for any policy)
    assert ok(_policy(admin, "research-escape", {"*": {"timeout_s": 0, "warning_s": 0}}))
    # a boolean is not a number of seconds
    r = _policy(admin, "research-escape", {"*": {"timeout_s": True, "warning_s": 0}})
    assert r.status_code == 422 and "timeout_s" in r.text, r.text


def test_bad_rules_are_refused_naming_what_is_wrong(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"a": 1})
    cases = [
        ({"no-such-class": RULE}, "unknown priority class 'no-such-class'"),
        ({"*": {"timeout_s": 60, "warning_s": 60}}, "warning_s (60) must be below timeout_s"),
        ({"*": {"timeout_s": -1, "warning_s": 0}}, "timeout_s"),
        ({"*": {"timeout_s": 60, "warning_s": 1, "extra": 1}}, "extra"),
        ({"bad name!": RULE}, "rules"),
    ]
    for rules, said in cases:
        r = _policy(admin, "a", rules)
        assert r.status_code == 422, (rules, r.text)
        assert said in r.text, (rules, r.text)
    assert ok(admin.get("/api/v1/tenants/a/idle-policy"))["own"] == {}


def test_the_sessions_list_shows_no_other_tenants_session(sqlite_server):
    server = sqlite_server
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"a": 1, "b": 1})
    bob = server.client(server.token("bob-b", "member", "b"))
    body = {"request": "gpu=1", "allocation": True, "max_runtime_s": 600, "name": f"s-{MARK}"}
    ok(bob.post("/api/v1/jobs", json=body), 201)
    server.cycle()  # granted: a live session (its workload not started: no agent here)
    assert [s["name"] for s in ok(bob.get("/api/v1/sessions"))] == [f"s-{MARK}"]
    for role in ("member", "tenant-admin", "viewer", "finance"):
        caller = server.client(server.token(f"{role}-a", role, "a"))
        mine = caller.get("/api/v1/sessions")
        assert mine.status_code == 200 and MARK not in mine.text, (role, mine.text)
        aimed = caller.get("/api/v1/sessions", params={"tenant": "b"})
        assert aimed.status_code == 404 and MARK not in aimed.text, (role, aimed.text)
    agent = server.client(server.token("agent-x", "agent", node="n0"))
    assert agent.get("/api/v1/sessions").status_code == 403

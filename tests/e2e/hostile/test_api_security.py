"""The API as a hostile or careless user meets it: job specs that would crash an agent or
inject runtime flags, node labels without bounds, reservations that lock others out, the
metrics endpoint, expiring tokens, disabled users, token minting, failed-login slowdown and
the files of the state of record."""

import stat
import time

import pytest

from gpupool.model.workload import MAX_ARGV_ENV_BYTES
from gpupool.server.settings import Settings
from tests.support.cluster import node_body, ok, seed_cluster, submit
from tests.support.live import live_server

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"command": ["true"], "env": {"A=B": "1"}}, "env"),
        ({"command": ["true"], "env": {"": "1"}}, "env"),
        ({"command": ["true"], "env": {"1X": "1"}}, "env"),
        ({"command": ["true"], "env": {"-e": "1"}}, "env"),
        ({"command": ["tr\x00ue"]}, "command[0]"),
        ({"command": ["true"], "env": {"SECRET": "a\x00b"}}, "env.SECRET"),
        ({"command": ["x" * 60000, "y" * 60000, "z" * 20000]}, "command"),
        ({"command": ["true"], "image": "--privileged"}, "image"),
        ({"command": ["true"], "image": "PyTorch:2"}, "image"),
        ({"command": ["true"], "image": "pytorch 2"}, "image"),
        ({"command": ["true"], "image": "pytorch:-x"}, "image"),
        ({"command": ["true"], "image": "-v"}, "image"),
    ],
)
def test_a_malformed_job_is_refused_naming_the_field(sqlite_server, extra, field):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    r = admin.post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "algo", **extra})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()
    assert ok(admin.get("/api/v1/jobs"))["total"] == 0


def test_good_images_and_the_size_bound_are_accepted(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    for image in (
        "pytorch",
        "pytorch:2.3-cuda12",
        "registry.example.com:5000/team/pytorch:2.3",
        f"nvcr.io/nvidia/pytorch@{DIGEST}",
        f"localhost/my_team/model-server:v1@{DIGEST}",
    ):
        submit(admin, "gpu=1", "algo", command=["true"], image=image)
    # just under the bound: the arguments with their NUL bytes
    near = ["a" * (MAX_ARGV_ENV_BYTES // 2 - 1), "b" * (MAX_ARGV_ENV_BYTES // 2 - 1)]
    submit(admin, "gpu=1", "algo", command=near)
    r = admin.post(
        "/api/v1/jobs", json={"request": "gpu=1", "tenant": "algo", "command": [*near, "c"]}
    )
    assert r.status_code == 422 and "more than the 131072 allowed" in r.json()["detail"]


def test_node_labels_are_bounded(sqlite_server):
    admin = sqlite_server.admin()
    many = {f"k{i}": "v" for i in range(65)}
    for labels, status in (
        (many, 422),
        ({"bad key!": "v"}, 422),
        ({"k": "v" * 1001}, 422),
        ({"k": "a\x00b"}, 422),
        ({"gpupool.io/rack": "r3", "zone": "a"}, 200),
    ):
        r = admin.post("/api/v1/nodes", json=node_body("n0", labels=labels))
        assert r.status_code == status, (labels, r.text)
    r = admin.patch("/api/v1/nodes/n0", json={"labels": many})
    assert r.status_code == 422 and r.json()["field"].startswith("labels")


def test_reservations_are_for_admins_validated_and_visible_to_whom_they_block(sqlite_server):
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=2, tenants={"a": 4, "b": 4})
    a_admin = srv.client(srv.token("ann", "tenant-admin", "a"))
    bob = srv.client(srv.token("bob", "member", "b"))
    now = time.time()
    day = 86400.0
    body = {"tenant": "a", "nodes": ["n0"], "start": now + 60, "end": now + day}
    r = a_admin.post("/api/v1/reservations", json=body)
    assert r.status_code == 403  # a tenant-admin may not lock the pool for itself
    for bad, field in (
        ({**body, "start": now - 3600}, "start"),
        ({**body, "end": body["start"]}, "end"),
        ({**body, "end": body["start"] + 400 * day}, "end"),
        ({**body, "nodes": ["n9"]}, "nodes"),
    ):
        r = admin.post("/api/v1/reservations", json=bad)
        assert r.status_code == 422 and r.json()["field"] == field, (bad, r.text)
    mine = ok(admin.post("/api/v1/reservations", json=body), 201)
    assert mine["start_iso"].endswith("Z") and "T" in mine["start_iso"]
    clash = {**body, "tenant": "b", "nodes": ["n1", "n0"], "start": now + 3600}
    r = admin.post("/api/v1/reservations", json=clash)
    assert r.status_code == 409
    assert r.json()["detail"].startswith(f"nodes: n0 is reserved by r-{mine['id']} of a from ")
    ok(admin.post("/api/v1/reservations", json={**clash, "nodes": ["n1"]}), 201)
    ok(admin.post("/api/v1/reservations", json={**body, "start": now + 120}), 201)  # same tenant
    # bob's team is blocked by a's reservation, so bob sees it: who holds which nodes when
    seen = ok(bob.get("/api/v1/reservations"))
    assert {(x["tenant"], tuple(x["nodes"])) for x in seen} >= {("a", ("n0",)), ("b", ("n1",))}
    assert bob.delete(f"/api/v1/reservations/{mine['id']}").status_code == 403
    ok(a_admin.delete(f"/api/v1/reservations/{mine['id']}"), 204)  # giving its own back


def test_a_blocked_job_names_the_reservation_with_iso_times(sqlite_server):
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=1, tenants={"a": 4, "b": 4})
    start = time.time() + 3600
    ok(
        admin.post(
            "/api/v1/reservations",
            json={"tenant": "a", "nodes": ["n0"], "start": start, "end": start + 3600},
        ),
        201,
    )
    # online work that would run past the reservation's start goes to its nodes only when
    # no other node has room (issue 59; kept off before), saying so
    job = submit(admin, "gpu=1", "b", max_runtime_s=7200, priority_class="online-inference")
    srv.cycle()
    got = ok(admin.get(f"/api/v1/jobs/{job['id']}"))
    assert got["state"] == "admitted", got
    assert "ahead of reservation r-1 of a (from 20" in got["reason"], got["reason"]
    assert "Z) on its nodes: no other node had room" in got["reason"]
    assert "t=1." not in got["reason"]
    # a reservation whose window is on keeps others' work off
    now = time.time()
    window = {"tenant": "a", "nodes": ["n0"], "start": now, "end": now + 60}
    ok(admin.post("/api/v1/reservations", json=window), 201)
    later = submit(admin, "gpu=1", "b", priority_class="online-inference")
    srv.cycle()
    reason = ok(admin.get(f"/api/v1/jobs/{later['id']}"))["reason"]
    assert "n0 reserved by r-2 of a until 20" in reason, reason
    assert reason.endswith("Z") and "t=1." not in reason


def test_metrics_need_a_metrics_or_admin_token(sqlite_server):
    srv = sqlite_server
    seed_cluster(srv.admin(), nodes=1, tenants={"a": 2})
    anonymous = srv.client().get("/metrics")
    assert anonymous.status_code == 401
    member = srv.client(srv.token("m", "member", "a"))
    assert member.get("/metrics").status_code == 403
    scrape = srv.client(srv.token("prometheus", "metrics"))
    r = scrape.get("/metrics")
    assert r.status_code == 200 and "gpupool_pool_gpus_free" in r.text
    # a scrape token reads nothing else
    assert scrape.get("/api/v1/jobs").status_code == 403
    assert scrape.get("/api/v1/nodes").status_code == 403
    assert srv.admin().get("/metrics").status_code == 200


def test_metrics_on_loopback_without_a_token_when_configured(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, metrics_access="loopback")
    with live_server(settings) as srv:
        r = srv.client().get("/metrics")
        assert r.status_code == 200 and "gpupool_nodes" in r.text


def test_tokens_expire_and_never_outlive_the_token_that_mints_them(sqlite_server):
    srv = sqlite_server
    seed_cluster(srv.admin(), nodes=1, tenants={"a": 2})
    short = srv.token("alice", "member", "a", expires_at=time.time() + 60)
    alice = srv.client(short)
    r = alice.post("/api/v1/users/alice/tokens", json={"expires_at": time.time() + 86400})
    assert r.status_code == 403 and "may not outlive" in r.json()["detail"]
    inherited = ok(alice.post("/api/v1/users/alice/tokens"), 201)
    assert inherited["expires_at"] is not None and inherited["expires_at"] <= time.time() + 60
    sooner = ok(
        alice.post("/api/v1/users/alice/tokens", json={"expires_at": time.time() + 1.0}), 201
    )
    assert srv.client(sooner["token"]).get("/api/v1/jobs").status_code == 200
    time.sleep(1.2)
    gone = srv.client(sooner["token"]).get("/api/v1/jobs")
    assert gone.status_code == 401 and "expired" in gone.json()["detail"]
    listed = {t["prefix"]: t for t in ok(alice.get("/api/v1/tokens"))}
    assert listed[sooner["prefix"]]["expires_at"] == pytest.approx(sooner["expires_at"])
    # an agent mints nothing, not even for itself
    agent = srv.client(srv.token("agent0", "agent", node="n0"))
    assert agent.post("/api/v1/users/agent0/tokens").status_code == 403
    # past expiry is refused with the field
    r = srv.admin().post(
        "/api/v1/users", json={"name": "x", "role": "viewer", "tenant": "a", "expires_at": 1.0}
    )
    assert r.status_code == 422 and r.json()["field"] == "expires"


def test_live_tokens_per_user_are_capped(sqlite_server):
    srv = sqlite_server
    seed_cluster(srv.admin(), nodes=1, tenants={"a": 2})
    alice = srv.client(srv.token("alice", "member", "a"))
    codes = [alice.post("/api/v1/users/alice/tokens").status_code for _ in range(50)]
    assert codes[:49] == [201] * 49 and codes[49] == 409  # 50 live tokens, the first included


def test_a_disabled_user_is_locked_out_until_enabled(sqlite_server):
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=1, tenants={"a": 2, "b": 2})
    alice = srv.client(srv.token("alice", "member", "a"))
    ann = srv.client(srv.token("ann", "tenant-admin", "a"))
    bob_admin = srv.client(srv.token("bert", "tenant-admin", "b"))
    submit(alice, "gpu=1")
    assert bob_admin.patch("/api/v1/users/alice", json={"disabled": True}).status_code == 404
    assert ann.patch("/api/v1/users/ann", json={"disabled": True}).status_code == 403
    out = ok(ann.patch("/api/v1/users/alice", json={"disabled": True}))
    assert out["disabled"] is True
    r = alice.get("/api/v1/jobs")
    assert r.status_code == 401 and "disabled" in r.json()["detail"]
    assert admin.post("/api/v1/users/alice/tokens").status_code == 409
    ok(admin.patch("/api/v1/users/alice", json={"disabled": False}))
    assert ok(alice.get("/api/v1/jobs"))["total"] == 1
    assert admin.patch("/api/v1/users/root", json={"disabled": True}).status_code == 409


def test_repeated_bad_tokens_from_one_address_are_slowed_down(tmp_path):
    settings = Settings(
        data_dir=tmp_path, log_json=False, auth_failure_limit=5, auth_failure_window_s=2
    )
    with live_server(settings) as srv:
        guesser = srv.client("gp_not-a-real-token")
        codes = [guesser.get("/api/v1/jobs").status_code for _ in range(6)]
        assert codes == [401] * 5 + [429]
        blocked = guesser.get("/api/v1/jobs")
        assert blocked.status_code == 429 and 1 <= int(blocked.headers["Retry-After"]) <= 3
        assert "too many failed authentications" in blocked.json()["detail"]
        other = srv.client("gp_another-guess")  # a new guess from the same address: blocked too
        assert other.get("/api/v1/jobs").status_code == 429
        time.sleep(2.1)
        assert guesser.get("/api/v1/jobs").status_code == 401  # the window moved on


def test_bad_tokens_never_lock_out_valid_ones_from_the_same_address(tmp_path):
    """The reproduction: a job on a node sends bad tokens to the API; every valid token from
    that address (the node's agent, users) used to get 429 and the node was declared lost.
    Valid tokens pass whatever the address did; a forged X-Forwarded-For from an untrusted
    peer changes nothing (the guesser stays blocked)."""
    settings = Settings(
        data_dir=tmp_path, log_json=False, auth_failure_limit=3, auth_failure_window_s=30
    )
    with live_server(settings) as srv:
        seed_cluster(srv.admin())
        agent = srv.client(srv.token("agent-n0", "agent", node="n0"))
        guesser = srv.client("gp_garbage")
        for i in range(10):
            spoof = {"X-Forwarded-For": f"203.0.113.{i}"}
            assert guesser.get("/api/v1/jobs", headers=spoof).status_code in (401, 429)
        assert guesser.get("/api/v1/jobs").status_code == 429
        assert (
            guesser.get("/api/v1/jobs", headers={"X-Forwarded-For": "198.51.100.7"}).status_code
            == 429
        )
        assert srv.admin().get("/api/v1/jobs").status_code == 200
        assert agent.get("/api/v1/nodes/n0/orders").status_code == 200
        r = srv.client().post("/ui/session", json={"token": srv.admin_token})
        assert r.status_code == 200  # the dashboard's login too
        assert srv.client().post("/ui/session", json={"token": "gp_bad"}).status_code == 429


def test_forwarded_addresses_count_only_from_configured_proxies(tmp_path):
    settings = Settings(
        data_dir=tmp_path, log_json=False, auth_failure_limit=2, auth_failure_window_s=30,
        trusted_proxies=["127.0.0.0/8"],
    )  # fmt: skip
    with live_server(settings) as srv:
        guesser = srv.client("gp_garbage")
        first = {"X-Forwarded-For": "198.51.100.1"}
        for _ in range(2):
            assert guesser.get("/api/v1/jobs", headers=first).status_code == 401
        assert guesser.get("/api/v1/jobs", headers=first).status_code == 429
        # another client behind the same proxy is its own address
        second = {"X-Forwarded-For": "198.51.100.2, 127.0.0.1"}
        assert guesser.get("/api/v1/jobs", headers=second).status_code == 401
    with pytest.raises(ValueError, match="trusted_proxies"):
        Settings(data_dir=tmp_path, trusted_proxies=["not-a-network"])


def test_the_database_and_data_dir_are_private(tmp_path):
    from gpupool.server.db.engine import Database

    data = tmp_path / "fresh"
    db = Database(f"sqlite:///{data / 'gpupool.db'}")
    db.migrate()
    with db.write() as s:
        from gpupool.server.auth import create_user_token

        create_user_token(s, "root", "admin")
    db.dispose()
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    for f in data.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    assert {f.name for f in data.iterdir()} >= {"gpupool.db"}

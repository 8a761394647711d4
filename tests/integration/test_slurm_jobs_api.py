"""sbatch's placement and timing options through the API and the real scheduler loop (issue
63), on SQLite and PostgreSQL: a whole node (--exclusive) with nothing else placed there, -w
and -x as placement constraints (refused only for a node that does not exist), --begin and
--dependency=singleton as gates."""

import time

from tests.support.cluster import ok, seed_cluster, started, submit


def job(client, job_id: int) -> dict:
    return ok(client.get(f"/api/v1/jobs/{job_id}"))


def end(client, job_id: int) -> None:
    alloc = job(client, job_id)["allocation"]
    body = {"generation": alloc["generation"], "state": "succeeded", "exit_code": 0}
    ok(client.post(f"/api/v1/allocations/{alloc['id']}/status", json=body))


def test_a_whole_node_holds_every_card_and_nothing_else_lands_there(server):
    admin = server.admin()
    seed_cluster(admin, nodes=2, cards=4, tenants={"algo": 16})
    whole = submit(admin, "gpu=1,node=whole", "algo", nodelist=["n1"])
    assert whole["request"] == "gpu=1,node=whole" and whole["nodelist"] == ["n1"]
    server.cycle()
    got = job(admin, whole["id"])
    (grant,) = got["allocation"]["nodes"]
    assert grant["node"] == "n1" and grant["whole"] and len(grant["devices"]) == 4
    started(admin, got)
    others = [submit(admin, spec, "algo") for spec in ("gpu=4", "gpu=1", "cpu=1")]
    server.cycle()
    placed = [job(admin, o["id"]) for o in others]
    assert placed[0]["allocation"]["nodes"][0]["node"] == "n0"  # the other node's 4 cards
    assert placed[1]["state"] == "pending" and placed[2]["state"] == "pending"
    assert "1 held whole by an exclusive job" in placed[1]["reason"], placed[1]["reason"]


def test_node_lists_and_exclusions_place_or_are_refused_by_name(server):
    admin = server.admin()
    seed_cluster(admin, nodes=3, cards=4, tenants={"algo": 12})
    for field in ("nodelist", "exclude"):
        refused = admin.post(
            "/api/v1/jobs",
            json={"request": "gpu=1", "tenant": "algo", "command": ["true"], field: ["n7"]},
        )
        assert refused.status_code == 422 and f"{field}: no node n7 in this pool" in refused.text
    two = admin.post(
        "/api/v1/jobs",
        json={"request": "gpu=1", "tenant": "algo", "command": ["x"], "nodelist": ["n0", "n1"]},
    )
    assert two.status_code == 422 and "names 2 nodes for 1 worker(s)" in two.text
    gang = submit(admin, "gpu=4", "algo", gang_size=2, one_per_node=True, nodelist=["n2"])
    kept_off = submit(admin, "gpu=1", "algo", exclude=["n0", "n1"])
    server.cycle()
    nodes = [n["node"] for n in job(admin, gang["id"])["allocation"]["nodes"]]
    assert nodes[0] == "n2" and len(set(nodes)) == 2
    waiting = job(admin, kept_off["id"])
    assert waiting["state"] == "pending"
    assert "2 excluded by the job (-x/--exclude)" in waiting["reason"], waiting["reason"]


def test_begin_time_and_singleton_gate_jobs(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    later = submit(admin, "gpu=1", "algo", begin_at=time.time() + 3600)
    soon = submit(admin, "gpu=1", "algo", begin_at=time.time() - 1)
    single = {"dependency": [{"type": "singleton"}], "name": "train"}
    first = submit(admin, "gpu=1", "algo", **single)
    second = submit(admin, "gpu=1", "algo", **single)
    assert second["dependency"] == [{"type": "singleton", "job": None}]
    server.cycle()
    assert job(admin, later["id"])["reason"].startswith("begin time: not before ")
    assert job(admin, later["id"])["wait_code"] == "gated"
    assert job(admin, soon["id"])["state"] == "admitted"
    assert job(admin, first["id"])["state"] == "admitted"
    same = f"singleton: job {first['id']} of the same name (train) and user (root) is"
    assert job(admin, second["id"])["reason"] == f"{same} pending ahead of it"  # both were
    server.cycle()
    assert job(admin, second["id"])["reason"] == f"{same} admitted"
    started(admin, first["id"])
    end(admin, first["id"])
    server.cycle()
    assert job(admin, second["id"])["state"] == "admitted"
    bad = admin.post(
        "/api/v1/jobs",
        json={"request": "gpu=1", "tenant": "algo", "command": ["x"],
              "dependency": [{"type": "singleton", "job": 3}]},
    )  # fmt: skip
    assert bad.status_code == 422

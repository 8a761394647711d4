"""scancel habits for arrays (issue 57): cancelling an array's id cancels the array — every
task not yet ended, pending and running, in one transaction — where it used to cancel its
first task alone while the rest kept starting; ``ID_TASK`` (``24_3``) cancels that task alone;
another tenant can no more cancel an array than a job. Against a real server whose scheduler
loop runs and an agent that runs the tasks as real processes."""

import json
import time

import pytest

from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    in_state,
    no_workload_outlives_its_test,
    two_teams_and_a_node,
    wait_for,
)
from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster

LIVE = ("pending", "admitted", "running")
# task 0 ends at once; the others run until stopped
TASK = ["sh", "-c", 'test "$GPUPOOL_ARRAY_TASK_ID" = 0 || exec sleep 60']


@pytest.fixture
def cluster(tmp_path):
    """A server with its scheduler loop, tenants algo and beta, and node n1 with 4 cards."""
    with two_teams_and_a_node(tmp_path) as srv:
        yield srv


def _env(srv, token: str | None = None) -> dict[str, str]:
    return {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": token or srv.admin_token}


def _array(admin, spec: str, tenant: str = "algo", command: list[str] | None = None) -> int:
    body = {"request": "gpu=1", "tenant": tenant, "command": command or TASK, "array": spec}
    return ok(admin.post("/api/v1/jobs", json=body), 201)["id"]


def _states(admin, array: int) -> dict[int, str]:
    """Each task's state, by index."""
    items = ok(admin.get("/api/v1/jobs", params={"array": array, "limit": 1000}))["items"]
    return {j["array_index"]: j["state"] for j in items}


def test_cancelling_an_array_leaves_no_task_pending_or_running(cluster):
    admin = cluster.admin()
    array = _array(admin, "0-5%2")
    wait_for("task 0's end", in_state(admin, array, "succeeded"), 30)

    def two_running() -> bool:
        return list(_states(admin, array).values()).count("running") == 2

    wait_for("two tasks running", two_running)
    r = gpupool("job", "cancel", str(array), env=_env(cluster))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"array {array}: 5 tasks cancelled"
    states = _states(admin, array)
    assert states == {0: "succeeded", **dict.fromkeys(range(1, 6), "cancelled")}
    time.sleep(1.5)  # cycles run (every 0.2 s): none of them starts a task again
    assert _states(admin, array) == states
    live = ok(admin.get("/api/v1/allocations", params={"state": "active"}))["items"]
    assert live == []  # the running tasks' cards are free; their agent stops them
    # one audited call, naming the array and how many tasks it cancelled
    audit = ok(admin.get("/api/v1/audit", params={"limit": 50}))["items"]
    cancels = [a for a in audit if a["action"] == "POST /api/v1/jobs/{job_id}/cancel"]
    assert [a["target"] for a in cancels] == [
        f"/api/v1/jobs/{array}/cancel -> array {array} (5 tasks)"
    ]
    again = gpupool("job", "cancel", str(array), env=_env(cluster))
    assert again.returncode == 2 and "every task has ended already" in again.stderr


def test_an_array_task_id_cancels_exactly_that_task(cluster):
    admin = cluster.admin()
    array = _array(admin, "0-3%1", command=["sleep", "60"])  # task 0 runs, 1-3 wait
    wait_for("task 0 running", lambda: _states(admin, array)[0] == "running", 30)
    env = _env(cluster)
    r = gpupool("job", "cancel", f"{array}_2", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"job {array + 2} (array {array} task 2) cancelled"
    assert _states(admin, array) == {0: "running", 1: "pending", 2: "cancelled", 3: "pending"}
    r = gpupool("job", "cancel", f"{array}_0", "--json", env=env)  # the first task alone
    assert [(j["id"], j["state"], j["cancelled"]) for j in json.loads(r.stdout)] == [
        (array, "cancelled", [array])
    ]
    # the others go on: the next one starts in its place (%1)
    states = wait_for("the next task", lambda: (s := _states(admin, array))[1] != "pending" and s)
    assert isinstance(states, dict) and states[1] in ("admitted", "running")
    assert states == {0: "cancelled", 1: states[1], 2: "cancelled", 3: "pending"}
    for bad, why in ((f"{array}_9", f"array {array} has no task 9"), ("24x", "'24x' is neither")):
        r = gpupool("job", "cancel", bad, env=env)
        assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr, r
    r = admin.post(f"/api/v1/jobs/{array + 1}/cancel", params={"task": 3})
    assert r.status_code == 422 and r.json()["field"] == "task"
    assert f"a task of array {array}, not an array's id" in r.json()["detail"]
    ok(admin.post(f"/api/v1/jobs/{array}/cancel"))  # the rest


def test_another_tenant_cannot_cancel_an_array(server):
    """As a single job: another tenant's array does not exist for a member (404), a viewer of
    its own tenant may not cancel (403); nothing changes."""
    admin = server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 2, "beta": 2})
    array = _array(admin, "0-3")
    server.cycle()
    before = _states(admin, array)
    beta = server.client(server.token("bob", "member", "beta"))
    viewer = server.client(server.token("vic", "viewer", "algo"))
    for params in ({}, {"task": 1}):
        assert beta.post(f"/api/v1/jobs/{array}/cancel", params=params).status_code == 404
        assert viewer.post(f"/api/v1/jobs/{array}/cancel", params=params).status_code == 403
    assert _states(admin, array) == before and "cancelled" not in before.values()
    algo = server.client(server.token("al", "member", "algo"))
    done = ok(algo.post(f"/api/v1/jobs/{array}/cancel"))
    assert sorted(done["cancelled"]) == [array + i for i in range(4)]
    assert set(_states(admin, array).values()) == {"cancelled"}

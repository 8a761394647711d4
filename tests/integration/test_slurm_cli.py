"""Slurm habits end to end: the real ``gpupool`` CLI against a real server on loopback whose
scheduler loop runs, and an agent that runs the jobs as real processes. An array of 20 with a
concurrency limit, a dependency chain, --wait with exit codes, holds, a drain that lets running
jobs finish and one that requeues them, and bad input refused with exit 2."""

import json

import pytest

from tests.support.agents import (
    in_state,
    no_workload_outlives_its_test,  # noqa: F401
    two_teams_and_a_node,
    wait_for,
    workload_groups,
)
from tests.support.cli import gpupool
from tests.support.cluster import ok


@pytest.fixture
def cluster(tmp_path):
    """A server with its scheduler loop, tenants algo and beta, and node n1 with 4 cards."""
    with two_teams_and_a_node(tmp_path) as srv:
        yield srv


def _env(srv, token: str | None = None) -> dict[str, str]:
    return {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": token or srv.admin_token}


def _most_at_once(admin, job_ids: list[int]) -> int:
    """The most jobs that held devices at the same moment, from their state histories."""
    edges = []
    for job_id in job_ids:
        events = ok(admin.get(f"/api/v1/jobs/{job_id}/events"))
        start = next(e["time"] for e in events if e["to_state"] == "admitted")
        end = next(e["time"] for e in events if e["to_state"] in ("succeeded", "failed"))
        edges += [(start, 1), (end, -1)]
    most = now = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):  # an end before a start at a tie
        now += step
        most = max(most, now)
    return most


def test_an_array_of_20_runs_at_most_3_at_once_and_saves_each_log(cluster, tmp_path):
    script = tmp_path / "sweep.sh"
    script.write_text(
        "#!/bin/sh\n#GPUPOOL --tenant algo --gpu 1 --array 0-19%3 --time 5\n"
        "#GPUPOOL --output logs/%A_%a.out --name sweep\n"
        'sleep 0.3; echo "task $GPUPOOL_ARRAY_TASK_ID of $GPUPOOL_ARRAY_TASK_COUNT"\n'
    )
    r = gpupool(
        "job", "submit", str(script), "--wait", env=_env(cluster), timeout=240, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0].endswith("20 tasks pending, at most 3 at once")
    array = int(r.stderr.split()[1].rstrip(":"))
    admin = cluster.admin()
    tasks = ok(admin.get("/api/v1/jobs", params={"array": array, "limit": 100}))["items"]
    assert len(tasks) == 20 and {t["state"] for t in tasks} == {"succeeded"}
    most = _most_at_once(admin, [t["id"] for t in tasks])
    assert 2 <= most <= 3, most  # four free cards: the limit, not the cards, held them back
    for t in tasks:
        saved = tmp_path / "logs" / f"{array}_{t['array_index']}.out"
        assert saved.read_text() == f"task {t['array_index']} of 20\n"


def test_a_dependency_chain_and_wait_exit_codes(cluster, tmp_path):
    env = _env(cluster)

    def submit(*args: str) -> dict:
        r = gpupool("job", "submit", "--tenant", "algo", "--json", *args, env=env)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    first = submit("--cpu", "1", "--", "sh", "-c", "sleep 0.5; exit 0")
    second = submit("--cpu", "1", "--dependency", f"afterok:{first['id']}", "--", "true")
    on_failure = submit("--cpu", "1", "-d", f"afternotok:{first['id']}", "--", "true")
    r = gpupool("job", "wait", str(second["id"]), "--timeout", "60", env=env)
    assert r.returncode == 0, r.stderr
    assert f"job {second['id']} succeeded" in r.stderr
    first_end = ok(cluster.admin().get(f"/api/v1/jobs/{first['id']}"))["finished_at"]
    second_events = ok(cluster.admin().get(f"/api/v1/jobs/{second['id']}/events"))
    assert next(e["time"] for e in second_events if e["to_state"] == "admitted") >= first_end

    def never_satisfied() -> dict | None:
        j = ok(cluster.admin().get(f"/api/v1/jobs/{on_failure['id']}"))
        return j if "can never be satisfied" in j["reason"] else None

    never = wait_for("never-satisfied reason", never_satisfied)
    assert never["state"] == "pending"
    r = gpupool("job", "cancel", str(on_failure["id"]), env=env)
    assert r.stdout.strip() == f"job {on_failure['id']} cancelled"
    # --wait returns the job's own exit code
    r = gpupool("job", "submit", "--tenant", "algo", "--cpu", "1", "--wait", "--",
                "sh", "-c", "exit 3", env=env, timeout=120)  # fmt: skip
    assert r.returncode == 3, r.stderr
    assert "failed: exit code 3" in r.stderr


def test_hold_and_release_from_the_cli(cluster):
    env = _env(cluster)
    r = gpupool("job", "submit", "--tenant", "algo", "--cpu", "1", "--hold", "--json", "--",
                "true", env=env)  # fmt: skip
    job = json.loads(r.stdout)
    assert job["held"] and job["reason"] == "held by root"
    r = gpupool("queue", "--state", "pending", "-o", "id,st,where", env=env)
    assert f"{job['id']}" in r.stdout and "held" in r.stdout
    r = gpupool("job", "release", str(job["id"]), env=env)
    assert r.returncode == 0 and f"job {job['id']} pending: queued" in r.stdout
    r = gpupool("job", "wait", str(job["id"]), "--timeout", "60", env=env)
    assert r.returncode == 0, r.stderr
    r = gpupool("job", "hold", str(job["id"]), env=env)
    assert r.returncode == 2 and "only pending jobs are held" in r.stderr


def test_drain_lets_running_jobs_finish_and_drain_now_requeues(cluster):
    env = _env(cluster)
    admin = cluster.admin()

    def submit(*command: str) -> int:
        r = gpupool("job", "submit", "--tenant", "algo", "--gpu", "1", "--json", "--",
                    *command, env=env)  # fmt: skip
        return json.loads(r.stdout)["id"]

    running = submit("sh", "-c", "sleep 1.5; echo done")
    wait_for("running", in_state(admin, running, "running"))
    r = gpupool("node", "drain", "n1", "--reason", "new fans", env=env)
    assert r.returncode == 0 and "node n1 drained (new fans)" in r.stdout
    waiting = submit("true")
    r = gpupool("nodes", "-R", env=env)
    assert "drained" in r.stdout and "new fans" in r.stdout
    done = wait_for("the running job's end", in_state(admin, running, "succeeded", "failed"))
    assert done["state"] == "succeeded"  # drained, not killed
    job = ok(admin.get(f"/api/v1/jobs/{waiting}"))
    assert (job["state"], job["reason"]) == ("pending", "0/1 nodes: 1 drained, lost or fenced")
    gpupool("node", "resume", "n1", env=env)
    wait_for("the waiting job's end", in_state(admin, waiting, "succeeded"))
    long = submit("sleep", "300")
    wait_for("running", in_state(admin, long, "running"))
    r = gpupool("node", "drain", "n1", "--now", env=env)
    assert "running jobs requeued" in r.stdout
    assert ok(admin.get(f"/api/v1/jobs/{long}"))["state"] == "pending"
    last = ok(admin.get(f"/api/v1/jobs/{long}/events"))[-1]
    assert (last["to_state"], last["reason"]) == ("pending", "requeued: node n1 drained by root")
    wait_for("the workload stopped", lambda: not workload_groups(cluster.ctx.settings.data_dir))


def test_bad_job_control_input_exits_2_with_the_reason(sqlite_server, tmp_path):
    admin = sqlite_server.admin()
    for tenant in ("algo", "beta"):
        ok(admin.post("/api/v1/tenants", json={"name": tenant}), 201)
    env = _env(sqlite_server)
    beta = _env(sqlite_server, sqlite_server.token("bea", "member", "beta"))
    theirs = json.loads(
        gpupool("job", "submit", "--tenant", "algo", "--json", "--", "true", env=env).stdout
    )
    script = tmp_path / "x.sh"
    cases = [
        (["--array", "5-1"], "array: '5-1' ends before it starts"),
        (["--array", "0-9%0"], "array: limit '0' after % is not a positive number"),
        (["--time", "25:99"], "time: '25:99' has a field out of range"),
        (["--dependency", "after:3"], "dependency: 'after' is not one of"),
        (["--dependency", "afterok:99999"], "dependency: no job 99999"),
    ]
    for args, why in cases:
        r = gpupool("job", "submit", "--tenant", "algo", *args, env=env)
        assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr, (args, r)
    r = gpupool("job", "submit", "-d", f"afterok:{theirs['id']}", env=beta)
    assert r.returncode == 2 and f"dependency: no job {theirs['id']}" in r.stderr
    script.write_text("#!/bin/sh\n#GPUPOOL --hold=yes\ntrue\n")
    r = gpupool("job", "submit", "--tenant", "algo", str(script), env=env)
    assert r.returncode == 2 and "line 2: --hold takes no value" in r.stderr
    r = gpupool("job", "list", "-o", "id,colour", env=env)
    assert r.returncode == 2 and "format: unknown column 'colour'" in r.stderr


def test_alloc_holds_devices_until_cancelled_and_bare_jobs_are_refused(cluster):
    env = _env(cluster)
    admin = cluster.admin()
    r = gpupool("alloc", "--tenant", "algo", "--gpu", "2", "--time", "10:00", "--wait", "60",
                env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    job_id = int(r.stdout.split()[1])
    assert r.stdout.startswith(f"job {job_id} holds n1[") and "gpupool job cancel" in r.stdout
    assert f"a shell there: gpupool shell {job_id}" in r.stdout
    job = ok(admin.get(f"/api/v1/jobs/{job_id}"))
    assert (job["state"], job["name"], job["max_runtime_s"]) == ("running", "alloc", 600)
    assert sum(len(n["devices"]) for n in job["allocation"]["nodes"]) == 2
    r = gpupool("job", "cancel", str(job_id), env=env)
    assert r.stdout.strip() == f"job {job_id} cancelled"
    # a job with nothing to run is refused; an allocation needs a time limit
    r = gpupool("job", "submit", "--tenant", "algo", "--gpu", "1", env=env)
    assert r.returncode == 2 and "command: required" in r.stderr and "gpupool alloc" in r.stderr
    r = admin.post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "algo", "allocation": True})
    assert r.status_code == 422 and "an allocation needs a time limit" in r.text

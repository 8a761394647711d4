"""The fault suite (issue 44): a real fleet on hosts of its own — PostgreSQL, two servers
(leader and standby) and agents, each in a network namespace this module creates — meets the
faults every fleet meets, and the workloads' own files judge: no gap where none was needed,
never two copies of a job at once, every acknowledged job run or queued, metered time equal to
the real lifetimes.

The knobs are scaled down so the suite takes minutes: a node is lost after 20 s of silence
(``heartbeat_timeout_s``, 300 by default) and its workloads stop themselves after about 13 s
(the lease: the timeout less its margin, a third of it). "Shorter" and "longer" outages are
measured against those.
"""

import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.agents import skip_module_unless_root
from tests.support.fleet import (
    PY,
    WRITER,
    Fleet,
    NetPostgres,
    Run,
    assert_never_two_at_once,
    largest_gap,
    runs,
    wait_until,
)
from tests.support.netns import Network, in_netns

skip_module_unless_root("network namespaces need root")

TIMEOUT_S = 20
SETTINGS = {
    "GPUPOOL_CYCLE_INTERVAL_S": "0.3",
    "GPUPOOL_LEADER_POLL_S": "0.5",
    "GPUPOOL_HEARTBEAT_TIMEOUT_S": str(TIMEOUT_S),
    "GPUPOOL_METERING_INTERVAL_S": "2",
    "GPUPOOL_LOG_JSON": "false",
    "GPUPOOL_ALLOW_PLAIN_HTTP": "true",  # private addresses inside the test's namespaces
}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Iterator[Fleet]:
    root = tmp_path_factory.mktemp("fleet")
    net, db, f = Network(), None, None
    try:
        db = NetPostgres(net.add("db"))
        servers = {role: net.add(role) for role in ("s1", "s2")}
        f = Fleet(root, net, db, servers, SETTINGS)
        argv = [PY, "-m", "gpupool.cli.main", "admin", "token", "create", "--name", "root"]
        out = subprocess.run(in_netns(servers["s1"], [*argv, "--database-url", db.url]),
                             check=True, capture_output=True, text=True, timeout=120)  # fmt: skip
        f.admin_token = out.stdout.split()[-1]
        f.start_servers("s1", "s2")
        admin = f.client("s1")
        assert admin.post("/api/v1/tenants", json={"name": "algo"}).status_code == 201
        for node in ("n1", "n2"):
            body = {"name": f"agent-{node}", "role": "agent", "node": node}
            f.tokens[node] = admin.post("/api/v1/users", json=body).json()["token"]
            f.start_agent(node, net.add(node))
        for node in ("n1", "n2"):
            wait_until(f"{node} ready", lambda n=node: _ready(f, n), 60)
        (root / "lines").mkdir()
        yield f
    finally:
        if f is not None:
            f.close()
        net.close()
        if db is not None:
            db.remove()


def _ready(f: Fleet, node: str) -> bool:
    r = f.client("s1").get(f"/api/v1/nodes/{node}")
    return r.status_code == 200 and r.json()["state"] == "ready"


def submit(f: Fleet, seconds: float, *, gang: int = 1, via: str = "s1") -> int:
    """A writer job of ``seconds`` (its every run), acknowledged by the server (retried while
    the server cannot answer)."""
    word = f"w{len(f.submissions)}-{time.monotonic_ns()}"
    command = [PY, "-c", WRITER, str(f.root / "lines"), str(seconds), word]
    body: dict = {"request": "gpu=1", "tenant": "algo", "command": command}
    if gang > 1:
        body |= {"gang_size": gang, "one_per_node": True}

    def post() -> int | None:
        r = f.client(via).post("/api/v1/jobs", json=body)
        assert r.status_code in (201, 500, 502, 503), r.text
        return int(r.json()["id"]) if r.status_code == 201 else None

    job = int(wait_until("the job acknowledged", post, 30))
    f.submissions[job] = f"{job}-{word}"
    return job


def mine(f: Fleet, job: int) -> list[Run]:
    """The runs of the job's latest submission."""
    return [r for r in runs(f.root / "lines") if r.submission == f.submissions[job]]


def gap(f: Fleet, job: int) -> float:
    return largest_gap(runs(f.root / "lines"), f.submissions[job])


def state(f: Fleet, job: int, via: str = "s1") -> dict:
    return f.client(via).get(f"/api/v1/jobs/{job}").json()


def writing(f: Fleet, job: int, parts: int = 1) -> bool:
    """Every part of the job has written a line."""
    return len({r.rank for r in mine(f, job)}) == parts


def wait_writing(f: Fleet, job: int, parts: int = 1) -> None:
    wait_until(f"job {job} writing", lambda: writing(f, job, parts), 30)


def finish(f: Fleet, *jobs: int, timeout: float = 90) -> None:
    """Every job succeeded; then what the files say holds, and the meter agrees with them."""
    for job in jobs:
        wait_until(f"job {job} succeeded", lambda j=job: state(f, j)["state"] == "succeeded",
                   timeout)  # fmt: skip
    found = runs(f.root / "lines")
    assert_never_two_at_once(found)
    usage = f.client("s1").get("/api/v1/usage", params={"tenant": "algo", "limit": 1000}).json()
    for job in jobs:
        ends: dict[int, float] = {}
        for record in usage["items"]:
            if record["job_id"] == job:
                ends[record["allocation_id"]] = max(
                    record["end"], ends.get(record["allocation_id"], 0)
                )
        for allocation in {r.allocation for r in mine(f, job)}:
            last = max(r.last for r in mine(f, job) if r.allocation == allocation)
            # the writer ends 0.2 s after its last line (or was killed within that)
            lasts = {r.rank: r.last for r in mine(f, job) if r.allocation == allocation}
            records = [
                (r.get("node"), round(r["start"], 3), round(r["end"], 3))
                for r in usage["items"] if r["allocation_id"] == allocation
            ]  # fmt: skip
            assert abs(ends[allocation] - (last + 0.2)) <= 1.0, (
                f"job {job} allocation {allocation}: metered to {ends[allocation]:.3f}, its "
                f"last line at {last:.3f} (each rank's: {lasts}; records {records})\n"
                f"{events(f, job)}"
            )


def assert_untouched(f: Fleet, *jobs: int) -> None:
    """The jobs ran through the fault: no silence of a second, one allocation each."""
    for job in jobs:
        assert gap(f, job) < 1.0, events(f, job)
        assert len(allocations(f, job)) == 1, events(f, job)


def events(f: Fleet, job: int) -> str:
    """The job's history, for a failure's message."""
    rows = f.client("s1").get(f"/api/v1/jobs/{job}/events").json()
    return "\n".join(f"{e['time']:.3f} {e['to_state']}: {e['reason']}" for e in rows)


def allocations(f: Fleet, job: int) -> set[int]:
    return {r.allocation for r in mine(f, job)}


def node_of(f: Fleet, job: int) -> str:
    return str(state(f, job)["allocation"]["nodes"][0]["node"])


def leader(f: Fleet) -> str | None:
    for role in f.servers:
        try:
            if f.client(role).get("/api/v1/status").json()["leader"]:
                return role
        except httpx.HTTPError:  # one that is down is not the leader
            continue
    return None


@pytest.fixture(autouse=True)
def whole_fleet(fleet) -> Iterator[None]:
    """Each scenario starts with both servers and both agents up and ready, nothing running."""
    fleet.start_servers(*(role for role in fleet.servers if role not in fleet.procs))
    for node in ("n1", "n2"):
        if f"agent-{node}@{node}" not in fleet.procs:
            fleet.start_agent(node, fleet.net.hosts[node])
        fleet.net.heal(fleet.net.hosts[node])
    for node in ("n1", "n2"):
        wait_until(f"{node} ready", lambda n=node: _ready(fleet, n), 60)
    yield


def test_a_gang_and_a_single_job_run_across_hosts(fleet):
    single, gang = submit(fleet, 3), submit(fleet, 3, gang=2)
    finish(fleet, single, gang)
    assert {r.rank for r in mine(fleet, gang)} == {0, 1}
    assert gap(fleet, single) < 1.0


def test_database_down_5s_stops_no_work_and_scheduling_resumes(fleet):
    single, gang = submit(fleet, 12), submit(fleet, 12, gang=2)
    wait_writing(fleet, single)
    wait_writing(fleet, gang, 2)
    fleet.db.halt()
    time.sleep(5)
    fleet.db.resume()
    back = time.monotonic()
    later = submit(fleet, 1)
    wait_until("a new job placed", lambda: state(fleet, later)["state"] != "pending", 20)
    assert time.monotonic() - back < 15
    finish(fleet, single, gang, later)
    assert_untouched(fleet, single, gang)


def test_database_down_longer_than_the_timeout_requeues_work_once(fleet):
    single = submit(fleet, 18)  # outlives its lease
    wait_writing(fleet, single)
    fleet.db.halt()
    time.sleep(TIMEOUT_S + 4)  # the lease ran out: the workload stopped itself
    fleet.db.resume()
    finish(fleet, single)
    # stopped, requeued, run again; never at once
    assert len(allocations(fleet, single)) == 2, events(fleet, single)


def test_servers_down_5s_stop_no_work(fleet):
    single, gang = submit(fleet, 12), submit(fleet, 12, gang=2)
    wait_writing(fleet, single)
    wait_writing(fleet, gang, 2)
    for role in list(fleet.servers):
        fleet.kill9(role)
    time.sleep(5)
    fleet.start_servers(*fleet.servers)
    finish(fleet, single, gang)
    assert_untouched(fleet, single, gang)


def test_servers_down_longer_than_the_timeout_requeue_work_once(fleet):
    gang = submit(fleet, 18, gang=2)
    wait_writing(fleet, gang, 2)
    for role in list(fleet.servers):
        fleet.kill9(role)
    time.sleep(TIMEOUT_S + 4)
    fleet.start_servers(*fleet.servers)
    finish(fleet, gang)
    assert len(allocations(fleet, gang)) == 2, events(fleet, gang)


def test_a_link_cut_shorter_than_the_lease_stops_nothing(fleet):
    single = submit(fleet, 10)
    wait_writing(fleet, single)
    host = fleet.net.hosts[node_of(fleet, single)]
    fleet.net.cut(host)
    time.sleep(5)
    fleet.net.heal(host)
    finish(fleet, single)
    assert_untouched(fleet, single)


def test_a_node_cut_off_longer_than_the_timeout_has_its_job_run_elsewhere_not_twice(fleet):
    single = submit(fleet, 20)
    wait_writing(fleet, single)
    node = node_of(fleet, single)
    fleet.net.cut(fleet.net.hosts[node])
    other = "n2" if node == "n1" else "n1"
    wait_until("the job run again", lambda: len(allocations(fleet, single)) == 2, 60)
    assert node_of(fleet, single) == other
    fleet.net.heal(fleet.net.hosts[node])
    finish(fleet, single)
    wait_until(f"{node} ready again", lambda: _ready(fleet, node), 60)


def test_a_gang_survives_its_agents_restarted_in_either_order(fleet):
    gang = submit(fleet, 16, gang=2)
    wait_writing(fleet, gang, 2)
    for first, second in (("n1", "n2"), ("n2", "n1")):
        fleet.kill9(f"agent-{first}@{first}")
        time.sleep(0.5)
        fleet.kill9(f"agent-{second}@{second}")
        time.sleep(0.5)
        fleet.start_agent(second, fleet.net.hosts[second])
        time.sleep(2)
        fleet.start_agent(first, fleet.net.hosts[first])
        for node in ("n1", "n2"):
            wait_until(f"{node} ready", lambda n=node: _ready(fleet, n), 30)
    finish(fleet, gang)
    assert_untouched(fleet, gang)


def test_a_cloned_agent_is_refused_and_runs_nothing(fleet):
    single = submit(fleet, 8)
    wait_writing(fleet, single)
    node = node_of(fleet, single)
    clone = fleet.net.hosts.get("clone") or fleet.net.add("clone")
    fleet.start_agent(node, clone)
    refused = "is run by another agent"
    wait_until("the clone refused", lambda: refused in fleet.log(f"agent-{node}@clone"), 30)
    fleet.kill9(f"agent-{node}@clone")
    finish(fleet, single)
    assert len(allocations(fleet, single)) == 1, events(fleet, single)
    assert len({r.pid for r in mine(fleet, single)}) == 1


def test_the_standby_takes_over_from_a_killed_leader_and_work_goes_on(fleet):
    single = submit(fleet, 10)
    wait_writing(fleet, single)
    first = wait_until("a leader", lambda: leader(fleet), 20)
    standby = next(role for role in fleet.servers if role != first)
    fleet.kill9(first)
    killed = time.monotonic()
    wait_until("the standby leads", lambda: leader(fleet) == standby, 15)
    later = submit(fleet, 1, via=standby)
    wait_until("a job placed by the new leader",
               lambda: state(fleet, later, standby)["state"] != "pending", 15)  # fmt: skip
    assert time.monotonic() - killed < 20
    fleet.start_servers(first)
    finish(fleet, single, later)
    assert gap(fleet, single) < 1.0


def test_a_restore_keeps_the_work_its_backup_knows_and_schedules_at_once(fleet):
    """The documented procedure: a backup while the fleet runs; later every server stopped,
    the backup restored, the servers started. The job the backup knows runs on without a gap;
    the restored database's generation is below what the agents acted on, and its new restore
    epoch has them follow it at once (not after 30 refused turns)."""
    single = submit(fleet, 24)
    wait_writing(fleet, single)
    dump = fleet.root / f"backup-{time.time_ns()}.dump"
    admin = [PY, "-m", "gpupool.cli.main", "admin"]
    url = ["--database-url", fleet.db.url]
    host = fleet.servers["s1"]
    taken = subprocess.run(in_netns(host, [*admin, "backup", str(dump), *url]),
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert taken.returncode == 0, taken.stderr
    for _ in range(3):  # the generation moves on past the backup's
        submit(fleet, 0.5)
    time.sleep(2)
    for role in list(fleet.servers):
        fleet.kill9(role)
    done = subprocess.run(in_netns(host, [*admin, "restore", str(dump), "--force", *url]),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    fleet.start_servers(*fleet.servers)
    back = time.monotonic()
    later = submit(fleet, 1)
    wait_until("a job after the restore running", lambda: writing(fleet, later), 30)
    assert time.monotonic() - back < 15
    finish(fleet, single, later)
    assert_untouched(fleet, single)
    assert "database was restored" in fleet.log("agent-n1@n1") + fleet.log("agent-n2@n2")

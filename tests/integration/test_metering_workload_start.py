"""The meter starts when the workload starts (issue 57), through the API as agents report:
an hourly checkpoint of a grant whose workload has not started writes nothing; a reported
start is bounded by the grant and the server's clock; each part of a gang runs its own meter;
an end report that also says when the workload started meters it when the running report was
lost, and so does a late one for an allocation released while its node was cut off."""

import time

import httpx
from sqlalchemy import select

from gpupool.scheduler.placement_json import placement_from_json
from gpupool.scheduler.session import CycleResult, Regrant
from gpupool.server.checkpoint import boundary, checkpoint
from gpupool.server.db.tables import AllocationRow, UsageRow
from gpupool.server.lifecycle import metered_seconds, release
from gpupool.server.regrants import apply_regrants
from tests.support.cluster import ok, seed_cluster, started, submit


def _records(server, job_id: int) -> list[UsageRow]:
    with server.ctx.db.read() as s:
        rows = s.execute(select(UsageRow).where(UsageRow.job_id == job_id)).scalars().all()
        return sorted(rows, key=lambda r: (r.start, r.node or ""))


def _agent(server, node: str) -> httpx.Client:
    return server.client(server.token(f"agent-{node}", "agent", node=node))


def _report(client: httpx.Client, alloc: dict, state: str, **extra) -> httpx.Response:
    body = {"generation": alloc["generation"], "state": state, **extra}
    return client.post(f"/api/v1/allocations/{alloc['id']}/status", json=body)


def test_the_hourly_checkpoint_of_a_workload_not_started_writes_nothing(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    now = time.time()
    job = submit(admin, "gpu=2", "algo")
    server.cycle(now - 2 * 3600 - 100.3)  # granted two hours ago; its workload never started
    assert server.ctx.loop.checkpoint_usage(now) == 0
    assert _records(server, job["id"]) == []
    assert ok(admin.get("/api/v1/usage/summary"))["items"] == []  # nor live
    with server.ctx.db.read() as s:
        alloc = s.execute(select(AllocationRow)).scalar_one()
        # settled with no record: its month closes, and the hours stay closed
        assert alloc.started_at is None and alloc.metered_until == boundary(now)
    # its agent, held up, says the workload started an hour and a half ago: the checkpointed
    # hours are not opened again, it counts from the boundary
    shown = started(admin, job, at=now - 5400)
    assert shown["started_at"] == boundary(now)
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    released = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["finished_at"]
    records = _records(server, job["id"])
    assert records[0].start == boundary(now) and records[-1].end == released
    assert sum(r.device_seconds for r in records) == 2 * metered_seconds(boundary(now), released)


def test_a_reported_start_is_bounded_by_the_grant_and_the_servers_clock(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    early, late = submit(admin, "gpu=1", "algo"), submit(admin, "gpu=1", "algo")
    server.cycle(time.time() - 600)
    before = started(admin, early, at=time.time() - 7200)  # an agent clock far behind
    assert before["started_at"] == before["created_at"]
    asked = time.time()
    ahead = started(admin, late, at=asked + 3600)  # an agent clock far ahead
    assert asked <= ahead["started_at"] <= time.time()
    again = started(admin, late, at=asked - 300)  # a part started once keeps its start
    assert again["started_at"] == ahead["started_at"]
    bad = _report(admin, before, "running", started_at=-1)
    assert bad.status_code == 422 and bad.json()["field"] == "started_at"


def _seconds_by_part(server, job_id: int) -> dict[str, int]:
    """Device-seconds per node (a record of the whole 2-node gang counts half for each)."""
    out: dict[str, int] = {}
    for r in _records(server, job_id):
        for node in ("n0", "n1") if r.node is None else (r.node,):
            out[node] = out.get(node, 0) + r.device_seconds // (2 if r.node is None else 1)
    return out


def test_each_part_of_a_gang_is_metered_from_its_own_start(server):
    admin = server.admin()
    seed_cluster(admin, nodes=2, cards=1, tenants={"algo": 2})
    job = submit(admin, "gpu=1", "algo", gang_size=2, one_per_node=True)
    server.cycle(time.time() - 1000.4)
    alloc = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["allocation"]
    created = alloc["created_at"]
    first, second = created + 100.2, created + 500.7
    ok(_report(_agent(server, "n0"), alloc, "running", started_at=first))
    live = ok(admin.get("/api/v1/usage/summary"))["items"]  # n0's part alone so far
    assert abs(live[0]["device_seconds"] - metered_seconds(first, time.time())) <= 1
    ok(_report(_agent(server, "n1"), alloc, "running", started_at=second))
    with server.ctx.db.write() as s:  # a checkpoint between n1's start and the end
        assert checkpoint(s, time.time(), interval=60) == 1
        assert checkpoint(s, time.time(), interval=60) == 0  # once
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    released = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["finished_at"]
    assert _seconds_by_part(server, job["id"]) == {
        "n0": metered_seconds(first, released),
        "n1": metered_seconds(second, released),
    }


def test_an_end_report_says_when_the_workload_started_if_the_running_report_was_lost(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    job = submit(admin, "gpu=1", "algo")
    server.cycle(time.time() - 600.5)
    alloc = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["allocation"]
    began, ended = alloc["created_at"] + 100.3, alloc["created_at"] + 400.8
    done = _report(_agent(server, "n0"), alloc, "succeeded", exit_code=0, started_at=began,
                   ended_at=ended, node="n0")  # fmt: skip
    ok(done)
    records = _records(server, job["id"])
    assert (records[0].start, records[-1].end) == (began, ended)
    assert sum(r.device_seconds for r in records) == metered_seconds(began, ended)


def test_a_start_never_heard_before_a_release_is_metered_from_the_late_report(server):
    """Its node was cut off as the workload started: the server released it (the node lost)
    with nothing metered; the agent's late end report says when it ran — refused as stale,
    it still meters that, once, within the release."""
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    job = submit(admin, "gpu=1", "algo")
    server.cycle(time.time() - 1000.5)
    alloc = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["allocation"]
    now = time.time()
    with server.ctx.db.write() as s:
        release(s, s.get(AllocationRow, alloc["id"]), now, "node n0 lost", metered_to=now - 100.5)
    assert _records(server, job["id"]) == []  # never started, as far as the server knew
    began, ended = alloc["created_at"] + 200.2, now - 300.7
    agent = _agent(server, "n0")
    for _ in range(2):  # the agent may say it again: metered once
        late = _report(agent, alloc, "lost", started_at=began, ended_at=ended, node="n0")
        assert late.status_code == 409 and "stale" in late.json()["detail"]
        records = _records(server, job["id"])
        assert (records[0].start, records[-1].end) == (began, ended)
        assert sum(r.device_seconds for r in records) == metered_seconds(began, ended)


def test_a_parked_replica_is_metered_as_it_held_then_as_it_holds(server):
    """A park (issue 49) keeps the allocation and its meter running: the card until the
    park, the parked placement (no device) after it; the workload's start is not reset."""
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    body = {"name": "chat", "request": "gpu=1,cpu=2", "command": ["serve"], "target": 10}
    ok(admin.post("/api/v1/services", json={**body, "tenant": "algo"}), 201)
    assert server.ctx.loop.leadership.try_acquire()
    server.ctx.loop.services.step(force=True)  # its replica's job
    [replica] = ok(admin.get("/api/v1/jobs", params={"tenant": "algo"}))["items"]
    now = time.time()
    server.cycle(now - 1000.2)
    alloc = started(admin, replica)
    parked_at = now - 400.6
    with server.ctx.db.write() as s:
        row = s.get(AllocationRow, alloc["id"])
        lent = {**row.placement, "nodes": [{**row.placement["nodes"][0], "devices": []}]}
        park = Regrant(str(replica["id"]), placement_from_json(str(replica["id"]), lent), False)
        assert apply_regrants(s, CycleResult(regrants=[park]), {park.job_id: row.id}, 99,
                              parked_at) == 1  # fmt: skip
    ok(admin.post(f"/api/v1/jobs/{replica['id']}/cancel"))
    released = ok(admin.get(f"/api/v1/jobs/{replica['id']}"))["finished_at"]
    records = _records(server, replica["id"])
    card = [r for r in records if r.model == "A100-80G"]
    held = [r for r in records if r.model == "cpu"]
    assert [(r.start, r.end) for r in card] == [(alloc["created_at"], parked_at)]
    assert card[0].device_seconds == metered_seconds(alloc["created_at"], parked_at)
    assert [(r.start, r.end, r.device_seconds) for r in held] == [(parked_at, released, 0)]
    assert held[0].cpu_milli_seconds == 2000 * metered_seconds(parked_at, released)


def test_allocations_granted_before_the_rule_keep_their_grant_as_their_start(server):
    """Upgrading to schema 0024: an allocation released, or whose workload had started, was
    metered from its grant and stays so; one still waiting for its workload starts when its
    agent says."""
    from alembic import command

    from gpupool.server.db.engine import alembic_config

    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    ended, running, waiting = (submit(admin, "gpu=1", "algo") for _ in range(3))
    server.cycle()
    started(admin, running, at=time.time())
    ok(admin.post(f"/api/v1/jobs/{ended['id']}/cancel"))  # released before it started
    cfg = alembic_config(server.ctx.settings.db_url)
    with server.ctx.db.engine.connect() as conn:  # as the schema was, then upgraded
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0023")
        command.upgrade(cfg, "head")
        conn.commit()
    with server.ctx.db.read() as s:
        rows = {a.job_id: a for a in s.execute(select(AllocationRow)).scalars()}
    assert rows[ended["id"]].started_at == rows[ended["id"]].created_at
    assert rows[running["id"]].started_at == rows[running["id"]].created_at
    assert rows[waiting["id"]].started_at is None

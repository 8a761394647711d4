"""Metering to the real end across a partition (issue 44): a node cut off has its workload
stop itself at its lease and the server releases it metered to the lease's end, the latest it
could have run; the agent's late report of the real end, refused as stale, still corrects the
meter downward. A job spanning nodes is metered part by part: a part cut off ends at its own
end, the others ran until the release (seen: one half of a 2-node job unbilled for 7.6 s)."""

import time
from itertools import pairwise

import httpx
from sqlalchemy import select

from gpupool.server.db.tables import AllocationRow, UsageRow
from gpupool.server.lifecycle import meter_to_reported_end, metered_seconds, release
from tests.support.cluster import seed_cluster, started, submit


def _allocation(server, job: dict, ago: float) -> int:
    """Granted ``ago`` seconds ago, its workload started at once on each node."""
    server.cycle(time.time() - ago)
    started(server.admin(), job)
    with server.ctx.db.read() as s:
        return s.execute(
            select(AllocationRow.id).where(AllocationRow.job_id == job["id"])
        ).scalar_one()


def _seconds_by_part(server, alloc_id: int) -> dict[str | None, int]:
    """Device-seconds per node part (a whole-allocation record counts half for each of two)."""
    with server.ctx.db.read() as s:
        rows = s.execute(select(UsageRow).where(UsageRow.allocation_id == alloc_id)).scalars()
        out: dict[str | None, int] = {}
        for row in rows:
            for node in ("n0", "n1") if row.node is None else (row.node,):
                share = row.device_seconds // (2 if row.node is None else 1)
                out[node] = out.get(node, 0) + share
        return out


def test_a_part_cut_off_is_metered_to_its_end_and_the_others_to_the_release(server):
    admin = server.admin()
    seed_cluster(admin, nodes=2, cards=1, tenants={"algo": 2})
    job = submit(admin, "gpu=1", "algo", gang_size=2, one_per_node=True)
    alloc_id = _allocation(server, job, 1000.3)
    now = time.time()
    with server.ctx.db.write() as s:
        alloc = s.get(AllocationRow, alloc_id)
        created = alloc.created_at
        release(s, alloc, now, "node n0 lost", metered_to=now - 400.5, part="n0")
    parts = _seconds_by_part(server, alloc_id)
    assert parts == {
        "n0": metered_seconds(created, now - 400.5),
        "n1": metered_seconds(created, now),
    }
    with server.ctx.db.write() as s:  # n1's agent reports, late, that its part ended earlier
        alloc = s.get(AllocationRow, alloc_id)
        assert meter_to_reported_end(s, alloc, now - 600.2, "n1")
        assert not meter_to_reported_end(s, alloc, now - 100, "n0")  # never later
        assert not meter_to_reported_end(s, alloc, now - 600.2, "n1")  # said once is enough
    assert _seconds_by_part(server, alloc_id) == {
        "n0": metered_seconds(created, now - 400.5),
        "n1": metered_seconds(created, now - 600.2),
    }


def test_a_late_end_report_corrects_a_checkpointed_meter_and_stays_refused(server):
    """Through the API, as the agent of a node that was cut off sends it: the allocation was
    checkpointed hourly, then released at the lease's end; the real end lies earlier."""
    admin = server.admin()
    seed_cluster(admin, nodes=1, cards=2, tenants={"algo": 2})
    job = submit(admin, "gpu=1", "algo")
    alloc_id = _allocation(server, job, 3 * 3600 + 100.4)
    now = time.time()
    assert server.ctx.loop.checkpoint_usage(now) == 1
    lease_end, real_end = now - 60.5, now - 5000.7  # inside a checkpointed hour
    with server.ctx.db.write() as s:
        alloc = s.get(AllocationRow, alloc_id)
        created, generation = alloc.created_at, alloc.generation
        release(s, alloc, now, "node n0 lost", metered_to=lease_end)
    agent = httpx.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {server.token('agent-n0', 'agent', node='n0')}"},
    )
    report = {"generation": generation, "state": "lost", "ended_at": real_end}
    r = agent.post(f"/api/v1/allocations/{alloc_id}/status", json=report)
    assert r.status_code == 409 and "stale" in r.json()["detail"]
    with server.ctx.db.read() as s:
        rows = sorted(
            s.execute(select(UsageRow).where(UsageRow.allocation_id == alloc_id)).scalars(),
            key=lambda row: row.start,
        )
    assert rows[0].start == created and rows[-1].end == real_end
    assert all(a.end == b.start for a, b in pairwise(rows))
    assert sum(row.device_seconds for row in rows) == metered_seconds(created, real_end)

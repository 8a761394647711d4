"""Metering in closed intervals: live allocations are metered up to each hour so a month can
close while jobs run, and the pieces of a lifetime add up to exactly its seconds — a
checkpoint run twice, by two servers or after a release never meters a second twice."""

import time
from itertools import pairwise

from sqlalchemy import select

from gpupool.server.checkpoint import boundary, checkpoint
from gpupool.server.db.tables import AllocationRow, UsageRow
from gpupool.server.lifecycle import metered_seconds
from tests.support.cluster import ok, seed_cluster, started, submit


def test_pieces_add_up_to_the_lifetime():
    created, end = 1000.7, 12345.2
    cuts = [created, 3600.0, 7200.0, 10800.0, end]
    pieces = [metered_seconds(a, b) for a, b in pairwise(cuts)]
    assert sum(pieces) == metered_seconds(created, end) == 11345
    assert boundary(7199.9) == 3600.0 and boundary(7200.0) == 7200.0


def _records(server, job_id: int) -> list[UsageRow]:
    with server.ctx.db.read() as s:
        return list(
            s.execute(select(UsageRow).where(UsageRow.job_id == job_id).order_by(UsageRow.id))
            .scalars()
            .all()
        )


def test_live_allocations_are_metered_hourly_and_exactly_once(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    now = time.time()
    job = submit(admin, "gpu=2", "algo")
    server.cycle(now - 3 * 3600 - 123.4)  # admitted a little over three hours ago
    started(admin, job)  # and its workload started at once
    assert server.ctx.loop.checkpoint_usage(now) == 1
    assert server.ctx.loop.checkpoint_usage(now) == 0  # once per boundary
    with server.ctx.db.write() as s:
        assert checkpoint(s, now) == 0  # another server at the same boundary: nothing twice
        alloc = s.execute(select(AllocationRow)).scalar_one()
        created, metered = alloc.created_at, alloc.metered_until
    assert metered == boundary(now)
    first = _records(server, job["id"])
    assert len(first) == 1 and first[0].end == metered
    assert first[0].device_seconds == 2 * metered_seconds(created, metered)
    # the summary counts the checkpointed part once and the rest live
    summary = ok(admin.get("/api/v1/usage/summary"))["items"][0]
    live = metered_seconds(created, time.time())
    assert abs(summary["device_seconds"] - 2 * live) <= 2
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    records = _records(server, job["id"])
    assert len(records) == 2 and records[1].start == metered
    released = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["finished_at"]
    total = sum(r.device_seconds for r in records)
    assert total == 2 * metered_seconds(created, released)  # the lifetime, exactly
    with server.ctx.db.write() as s:
        assert checkpoint(s, time.time() + 7200) == 0  # released: nothing more


def test_an_end_reported_after_a_checkpoint_corrects_what_was_metered_past_it(server):
    """The kill -9 case: the server comes back and checkpoints a live allocation to the
    boundaries before the re-adopting agent reports that its workload ended earlier. The end
    report replaces every record past the end, so the bill stops at the real end."""
    from gpupool.server.lifecycle import release

    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    now = time.time()
    job = submit(admin, "gpu=1", "algo")
    server.cycle(now - 3 * 3600 - 100.4)
    started(admin, job)
    assert server.ctx.loop.checkpoint_usage(now - 2 * 3600) == 1
    assert server.ctx.loop.checkpoint_usage(now) == 1  # two records, up to the last boundary
    with server.ctx.db.write() as s:
        alloc = s.execute(select(AllocationRow)).scalar_one()
        created = alloc.created_at
        ended = boundary(now) - 3600 - 1800.6  # inside the first checkpointed interval
        release(s, alloc, now, "exit code 0", metered_to=ended)
    records = sorted(_records(server, job["id"]), key=lambda r: r.start)
    assert sum(r.device_seconds for r in records) == metered_seconds(created, ended)
    assert records[0].start == created and records[-1].end == ended
    assert all(a.end == b.start for a, b in pairwise(records))  # back to back
    with server.ctx.db.write() as s:
        assert checkpoint(s, now + 7200) == 0


def test_a_whole_card_is_metered_at_its_full_memory_whatever_the_cards_mode(server):
    """A share-mode card keeps a headroom of its memory out of shares; a job holding the
    whole card still holds all of it, so GPU-memory billing counts 80 GiB, not 72."""
    from tests.support.cluster import pool_with_a_node, team

    admin = server.admin()
    pool_with_a_node(admin, "shared", "share", "s0", ["share"])
    team(admin, "algo", 1)
    whole = submit(admin, "gpu=1", "algo")
    server.cycle(time.time() - 3600)
    started(admin, whole)
    ok(admin.post(f"/api/v1/jobs/{whole['id']}/cancel"))
    (record,) = _records(server, whole["id"])
    seconds = metered_seconds(record.start, record.end)  # whole seconds, as metered
    assert record.compute_pct_seconds == 100 * seconds
    assert record.mem_mib_seconds == 81920 * seconds  # the card's 80 GiB
    half = submit(admin, "gpu_share=0.5,gpu_mem=20GiB", "algo")
    server.cycle()
    started(admin, half)
    ok(admin.post(f"/api/v1/jobs/{half['id']}/cancel"))
    (record,) = _records(server, half["id"])
    assert record.mem_mib_seconds == 20480 * metered_seconds(record.start, record.end)

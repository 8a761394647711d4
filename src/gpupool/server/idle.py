"""Idle cards, from the agents' telemetry: each heartbeat, a live allocation's devices that
report under ``IDLE_UTIL_PCT`` utilisation add the time since the node's previous heartbeat
(at most ``MAX_SAMPLE_S``) to the allocation's idle card-percent-seconds — cards held but
burning money for nothing (the seed's "白白烧钱"). Only a part whose workload started counts:
before, the tenant is not billed for the card (``meter_clock``).

The same telemetry keeps an interactive session's idle clock (``interactive.culling``): a
heartbeat in which one of its cards shows activity — utilisation at or over
``IDLE_UTIL_PCT``, memory in use moved by ``MEM_ACTIVE_MIB`` or more since the card's
previous telemetry, or a utilisation its agent cannot read (what cannot be seen is never
taken for idle) — stamps the allocation's ``active_at``. A shared card's figures are the
card's: a busy neighbour on it keeps a session from looking idle."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.scheduler.cycle import MIG_PERCENT
from gpupool.server.db.tables import AllocationNodeRow, AllocationRow, JobRow
from gpupool.server.lifecycle import live_on

IDLE_UTIL_PCT = 5.0
MAX_SAMPLE_S = 60.0  # a node silent longer than this is not known to have been idle
MEM_ACTIVE_MIB = 64  # memory in use moving this much between two telemetries is activity


def idle_share(placement: dict, node: str, idle_devices: set[int]) -> int:
    """The card percent an allocation holds on ``node``'s idle devices."""
    pct = 0
    for n in placement["nodes"]:
        if n["node"] != node:
            continue
        for d in n["devices"]:
            if d["device"] in idle_devices:
                mig = d.get("mig_profile")
                pct += MIG_PERCENT.get(mig, 0) if mig else d["compute_pct"]
    return pct


def idle_util(util_pct: float | None) -> bool:
    """A device reporting this utilisation is idle (unknown is not)."""
    return util_pct is not None and util_pct < IDLE_UTIL_PCT


def gpu_active(util_pct: float | None, mem_mib: int | None, mem_before: object) -> bool:
    """A device shows activity for idle culling (unknown utilisation counts as activity)."""
    if util_pct is None or util_pct >= IDLE_UTIL_PCT:
        return True
    if mem_mib is None or not isinstance(mem_before, int):
        return False
    return abs(mem_mib - mem_before) >= MEM_ACTIVE_MIB


def record_activity(session: Session, active: dict[str, set[int]], now: float) -> None:
    """``active``: per node, its device indexes that showed activity in this telemetry; the
    live interactive allocations holding any of them are stamped active now (one read for
    every node)."""
    nodes = [n for n, devices in active.items() if devices]
    if not nodes:
        return
    live = session.execute(
        live_on(select(AllocationNodeRow.node, AllocationRow), nodes)
        .join(JobRow, JobRow.id == AllocationRow.job_id)
        .where(AllocationRow.started_at.is_not(None), JobRow.interactive.is_not(None))
    ).all()
    for node, alloc in live:
        if idle_share(alloc.placement, node, active[node]) and (alloc.active_at or 0) < now:
            alloc.active_at = now


def record_idle(session: Session, samples: dict[str, tuple[set[int], float]]) -> None:
    """``samples``: per node, (its idle device indexes, seconds since its previous
    telemetry), from one or more heartbeats; one read for all of them."""
    seconds = {n: min(max(0.0, s), MAX_SAMPLE_S) for n, (idle, s) in samples.items() if idle}
    nodes = [n for n, s in seconds.items() if s > 0]
    if not nodes:
        return
    started = AllocationNodeRow.started_at.is_not(None)
    live = session.execute(
        live_on(select(AllocationNodeRow.node, AllocationRow), nodes).where(started)
    ).all()
    for node, alloc in live:
        pct = idle_share(alloc.placement, node, samples[node][0])
        if pct:
            alloc.idle_pct_seconds = (alloc.idle_pct_seconds or 0) + round(pct * seconds[node])

"""Idle cards, from the agents' telemetry: each heartbeat, a live allocation's devices that
report under ``IDLE_UTIL_PCT`` utilisation add the time since the node's previous heartbeat
(at most ``MAX_SAMPLE_S``) to the allocation's idle card-percent-seconds — cards held but
burning money for nothing (the seed's "白白烧钱")."""

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.scheduler.cycle import MIG_PERCENT
from gpupool.server.db.tables import AllocationRow
from gpupool.server.lifecycle import live_on

IDLE_UTIL_PCT = 5.0
MAX_SAMPLE_S = 60.0  # a node silent longer than this is not known to have been idle


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


def record_idle(
    session: Session, node: str, samples: Iterable[tuple[int, float | None]], interval: float
) -> None:
    """``samples``: (device index, utilisation %) from one heartbeat."""
    idle = {index for index, util in samples if util is not None and util < IDLE_UTIL_PCT}
    seconds = min(max(0.0, interval), MAX_SAMPLE_S)
    if not idle or seconds <= 0:
        return
    for alloc in session.execute(live_on(select(AllocationRow), node)).scalars():
        pct = idle_share(alloc.placement, node, idle)
        if pct:
            alloc.idle_pct_seconds = (alloc.idle_pct_seconds or 0) + round(pct * seconds)

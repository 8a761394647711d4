"""After each cycle, hybrid pools follow their queue: ``gpupool.sharing.hybrid.plan_modes``
picks idle cards to switch between MIG and sharing within the pool's bounds; the server marks
them (``want_mode``: no new work lands there meanwhile), audits each order, and the node's
agent switches the card and reports its new mode in its next heartbeat."""

from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.model import Job, SharingMode, SliceKind
from gpupool.model.devices import model_matches
from gpupool.scheduler.cycle import CycleResult
from gpupool.scheduler.reasons import Wait
from gpupool.server.db.tables import AuditRow, DeviceRow, NodeRow, Pool
from gpupool.server.lifecycle import bump_nodes_version, held_devices
from gpupool.server.pool_modes import order_out_of_mig
from gpupool.sharing.hybrid import HybridBounds, HybridCard, ModeChange, plan_modes
from gpupool.sharing.mig import table_for


def waiting_for_room(result: CycleResult, pending: list[Job], models: set[str]) -> tuple[int, int]:
    """(MIG requests, share or whole-card requests) that wait because nothing fits and could
    use a card of one of ``models`` (a T4 request does not re-cut A100s)."""
    mig = other = 0
    for job in pending:
        reason = result.pending.get(job.id)
        request = job.request
        if reason is None or reason.code is not Wait.NO_ROOM or not request.gpu_count:
            continue
        if request.gpu_model and not any(model_matches(request.gpu_model, m) for m in models):
            continue
        if request.kind is not SliceKind.MIG:
            other += 1
        elif any(_has_profile(m, request.mig_profile or "") for m in models):
            mig += 1
    return mig, other


def _has_profile(model: str, profile: str) -> bool:
    table = table_for(model)
    return table is not None and table.has(profile)


def give_up_stale(s: Session, now: float, timeout_s: float) -> int:
    """Orders the agent did not carry out within ``timeout_s``: the card takes work again as
    it is (audited), and the pool does not order it again for six timeouts."""
    stale = s.execute(
        select(DeviceRow).where(
            DeviceRow.want_mode.is_not(None), DeviceRow.want_since < now - timeout_s
        )
    ).scalars()
    n = 0
    for d in stale:
        s.add(
            AuditRow(time=now, actor="scheduler", role="", action="MODE switch timed out",
                     target=f"{d.node} device {d.index} stays {d.mode} (no switch to "
                            f"{d.want_mode} within {timeout_s:.0f} s)", result=200,
                     client="", detail="")
        )  # fmt: skip
        d.want_mode = None  # ``want_since`` stays: the card is not asked again for a while
        n += 1
    if n:
        bump_nodes_version(s)
    return n


def _switchable(d: DeviceRow, now: float, timeout_s: float) -> bool:
    """Healthy, and not a card that could not switch (its agent said why) or whose agent did
    not answer an order in the last six timeouts."""
    gave_up = d.want_mode is None and d.want_since is not None
    recently = gave_up and now - (d.want_since or 0.0) < 6 * timeout_s
    return d.healthy and not (d.telemetry or {}).get("mode_error") and not recently


def order_switches(
    s: Session,
    result: CycleResult,
    pending: list[Job],
    now: float,
    timeout_s: float = 600.0,
    allow: Callable[[str, int, str, str], bool] = lambda node, index, to, why: True,
) -> list[ModeChange]:
    """Order the switches each hybrid pool needs now, and a share pool's idle MIG cards out
    of MIG; returns them (for the tests). ``allow(node, index, to, why)``: advisory mode's
    say on each switch."""
    give_up_stale(s, now, timeout_s)
    every = list(s.execute(select(Pool)).scalars())
    shared = [p.name for p in every if p.sharing == "share"]
    pools = [p for p in every if p.sharing == "hybrid"]
    if not pools and not shared:
        return []
    held = held_devices(s)  # one read of the live allocations for both kinds of pool
    ordered = order_out_of_mig(
        s, now, shared, held,
        lambda d: _switchable(d, now, timeout_s) and allow(d.node, d.index, "share", "share pool"),
    )  # fmt: skip
    for pool in pools:
        rows = s.execute(
            select(DeviceRow)
            .join(NodeRow, NodeRow.name == DeviceRow.node)
            .where(NodeRow.pool == pool.name, NodeRow.state == "ready", NodeRow.schedulable)
        ).scalars()
        devices = {(d.node, d.index): d for d in rows if d.mode in ("mig", "share")}
        cards = [
            HybridCard(
                d.node,
                d.index,
                d.model,
                SharingMode(d.mode),
                idle=key not in held and _switchable(d, now, timeout_s),
                want=SharingMode(d.want_mode) if d.want_mode else None,
            )
            for key, d in sorted(devices.items())
        ]
        bounds = HybridBounds(pool.mig_cards_min, pool.mig_cards_max)
        waiting_mig, waiting_other = waiting_for_room(result, pending, {c.model for c in cards})
        for change in plan_modes(cards, bounds, waiting_mig, waiting_other):
            why = f"pool {pool.name}: {change.why}"
            if not allow(change.node, change.index, change.mode.value, why):
                continue  # proposed (advisory mode), not ordered
            ordered_card = devices[(change.node, change.index)]
            ordered_card.want_mode, ordered_card.want_since = change.mode.value, now
            s.add(
                AuditRow(
                    time=now,
                    actor="scheduler",
                    role="",
                    action="MODE switch",
                    target=(
                        f"{change.node} device {change.index} -> {change.mode.value} "
                        f"(pool {pool.name}: {change.why})"
                    )[:500],
                    result=200,
                    client="",
                    detail="",
                )
            )
            ordered.append(change)
    if ordered:
        bump_nodes_version(s)  # the switching cards take no new work meanwhile
    return ordered

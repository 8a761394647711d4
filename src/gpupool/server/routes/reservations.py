"""Reservations: whole nodes, or N cards of a model, held for a tenant over a time window."""

import time

from fastapi import APIRouter, Response
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpupool.scheduler.reservations import Holder, Reservation, displaced, held_on, iso
from gpupool.server.auth import Role
from gpupool.server.db.tables import (
    AllocationNodeRow,
    AllocationRow,
    DeviceRow,
    JobRow,
    NodeRow,
    ReservationRow,
    TenantRow,
)
from gpupool.server.deps import Caller, Ctx, Id, human, require
from gpupool.server.errors import ApiError, forbidden, not_found
from gpupool.server.reservation_preview import Preview, outage, status
from gpupool.server.reservation_schemas import ReservationIn, ReservationOut
from gpupool.server.snapshot import reservations, tenant_tree

router = APIRouter(prefix="/api/v1", tags=["reservations"])
ADMIN = (Role.ADMIN,)
MAX_RESERVATION_S = 366 * 86400
PAST_SLACK_S = 60  # a start this far back still counts as "now" (clock skew, typing)


def reservation_out(r: ReservationRow) -> ReservationOut:
    return ReservationOut(
        id=r.id,
        tenant=r.tenant,
        nodes=list(r.nodes),
        cards=r.cards,
        start=r.start,
        end=r.end,
        start_iso=iso(r.start),
        end_iso=iso(r.end),
        created_by=r.created_by,
    )


def _check_window(body: ReservationIn, now: float) -> None:
    if body.end <= body.start:
        raise ApiError(422, "end: must be after start", "end")
    if body.start < now - PAST_SLACK_S:
        raise ApiError(422, f"start: {iso(body.start)} is in the past", "start")
    if body.end - body.start > MAX_RESERVATION_S:
        raise ApiError(422, "end: a reservation lasts at most 366 days", "end")


def _overlapping(s: Session, body: ReservationIn, now: float) -> list[ReservationRow]:
    """Other tenants' reservations that overlap this one in time."""
    q = select(ReservationRow).where(
        ReservationRow.end > max(now, body.start),
        ReservationRow.start < body.end,
        ReservationRow.tenant != body.tenant,
    )
    return list(s.execute(q).scalars())


def _cards_of(s: Session, model: str | None) -> dict[str, int]:
    """Healthy cards per node (of ``model`` only, when given)."""
    q = select(DeviceRow.node, func.count()).where(DeviceRow.healthy.is_(True))
    if model is not None:
        q = q.where(DeviceRow.model == model)
    return {node: int(n) for node, n in s.execute(q.group_by(DeviceRow.node))}


def _pick_nodes(s: Session, body: ReservationIn, taken: set[str]) -> list[str]:
    """Nodes for N cards of a model: the fewest (largest first, then by name), none held by
    another tenant then; the hold sits packed on them in this order."""
    assert body.cards is not None
    counts = _cards_of(s, body.model)
    if not counts:
        raise ApiError(422, f"model: no node has {body.model} cards", "model")
    chosen, total = [], 0
    for node, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if node in taken:
            continue
        chosen.append(node)
        total += n
        if total >= body.cards:
            return chosen
    free = sum(n for node, n in counts.items() if node not in taken)
    raise ApiError(
        409,
        f"cards: {body.cards} {body.model} cards asked, {free} on nodes no other tenant holds then",
        "cards",
    )


@router.post("/reservations", status_code=201, response_model=ReservationOut)
def create_reservation(
    body: ReservationIn, ctx: Ctx, who: Caller, response: Response
) -> ReservationOut:
    """Lock nodes — or N cards of a model (``cards``, ``model``; on ``nodes`` when given, else
    on the fewest nodes of that model) — for a tenant over [start, end) (epoch seconds;
    admins). The window may not lie in the past, last over 366 days, or overlap another
    tenant's reservation of a node. The answer says what it does when it begins (``plan``:
    the jobs it stops, the online work it moves — a copy elsewhere first — and where). One
    that would leave online work (a service) without a place, at its start or when another
    reservation begins during its window, is refused naming it (409) unless
    ``allow_outage``; ``dry_run`` creates nothing and answers 200 with the plan."""
    require(who, ADMIN, "reserving nodes")
    try:
        return _create(body, ctx, who)
    except _DryRun as dry:
        response.status_code = 200
        return dry.out


def _create(body: ReservationIn, ctx: Ctx, who: Caller) -> ReservationOut:
    now = time.time()
    _check_window(body, now)
    with ctx.db.write() as s:
        if s.get(TenantRow, body.tenant) is None:
            raise ApiError(422, f"tenant: unknown tenant {body.tenant!r}", "tenant")
        others = _overlapping(s, body, now)
        nodes = body.nodes or _pick_nodes(s, body, {n for r in others for n in r.nodes})
        known = set(s.execute(select(NodeRow.name).where(NodeRow.name.in_(nodes))).scalars())
        missing = [n for n in nodes if n not in known]
        if missing:
            raise ApiError(422, f"nodes: unknown node {missing[0]!r}", "nodes")
        clash = next((r for r in others if set(nodes) & set(r.nodes)), None)
        if clash is not None:
            shared = sorted(set(nodes) & set(clash.nodes))
            raise ApiError(
                409,
                f"nodes: {shared[0]} is reserved by r-{clash.id} of {clash.tenant} from "
                f"{iso(clash.start)} to {iso(clash.end)}",
                "nodes",
            )
        if body.cards is not None:
            there = sum(_cards_of(s, body.model).get(n, 0) for n in nodes)
            if there < body.cards:
                kind = f"{body.model} " if body.model else ""
                raise ApiError(422, f"cards: {nodes} have {there} {kind}cards", "cards")
        row = ReservationRow(
            tenant=body.tenant,
            nodes=list(dict.fromkeys(nodes)),
            cards=body.cards,
            start=body.start,
            end=body.end,
            created_by=who.user,
        )
        s.add(row)
        s.flush()
        new = Reservation(f"r-{row.id}", row.tenant, tuple(row.nodes), row.start, row.end,
                          row.cards)  # fmt: skip
        existing = reservations(s)
        preview = Preview.read(s, ctx.settings)
        out = reservation_out(row)
        out.displaces = _displaced(s, row)
        out.plan = preview.out(preview.plan(new, existing, now), new, lambda _: True)
        out.status = status(new, out.plan, now)
        refused = outage(out.plan, existing, new)
        if body.dry_run:  # the transaction is rolled back: nothing is created
            out.id, out.dry_run = None, True
            raise _DryRun(out)
        if refused and not body.allow_outage:
            raise ApiError(409, f"nodes: {refused}", "nodes")
    ctx.loop.wake()
    return out


class _DryRun(Exception):
    """Leaves a dry run's transaction, rolled back, with its answer."""

    def __init__(self, out: ReservationOut):
        super().__init__("dry run")
        self.out = out


def _displaced(s: Session, row: ReservationRow) -> list[int]:
    """The jobs it will stop when its window begins (a hold of cards: those it may stop —
    others' work on the nodes its cards sit on, as many as are short then)."""
    chain = tenant_tree(s).chain  # each tenant with its ancestors
    nodes = list(row.nodes)
    if row.cards is not None:  # the hold sits packed on its first nodes, as the engine has it
        held = held_on(nodes, row.cards, _cards_of(s, None))
        nodes = [node for node in nodes if held[node] > 0]
    live = s.execute(
        select(AllocationRow.job_id, JobRow.tenant, AllocationNodeRow.node, JobRow.started_at,
               AllocationRow.created_at, JobRow.max_runtime_s)
        .join(JobRow, JobRow.id == AllocationRow.job_id)
        .join(AllocationNodeRow, AllocationNodeRow.allocation_id == AllocationRow.id)
        .where(AllocationRow.state == "active", AllocationNodeRow.node.in_(nodes))
    ).all()  # fmt: skip
    holders = {  # one entry a job: any node of it inside the reservation is enough
        job: Holder(str(job), chain[tenant], (node,), None if limit is None else (t or t0) + limit)
        for job, tenant, node, t, t0, limit in live
    }
    window = Reservation(f"r-{row.id}", row.tenant, tuple(nodes), row.start, row.end)
    return sorted(int(j) for j in displaced(window, list(holders.values())))


@router.get("/reservations", response_model=list[ReservationOut])
def list_reservations(ctx: Ctx, who: Caller) -> list[ReservationOut]:
    """Current and future reservations, every tenant's: a reservation blocks every other
    tenant's jobs on its nodes, so each may see who holds which nodes when. One not yet
    begun says what it will do then (``plan``: the jobs it stops and the online work it
    moves, those of tenants the caller may not see counted in ``hidden``) and what it keeps
    off its nodes meanwhile (``status``)."""
    human(who)
    now = time.time()
    q = select(ReservationRow).where(ReservationRow.end > now)
    with ctx.db.read() as s:
        rows = list(s.execute(q.order_by(ReservationRow.start, ReservationRow.id)).scalars())
        every = reservations(s)
        preview = Preview.read(s, ctx.settings) if any(r.start > now for r in rows) else None
        out = []
        for row in rows:
            item = reservation_out(row)
            held = next(r for r in every if r.id == f"r-{row.id}")
            if preview is not None and row.start > now:  # what it will do when it begins
                item.plan = preview.out(preview.plan(held, every, now), held, who.sees)
            item.status = status(held, item.plan, now)
            out.append(item)
        return out


@router.delete("/reservations/{res_id}", status_code=204)
def delete_reservation(res_id: Id, ctx: Ctx, who: Caller) -> None:
    """Admins, or a tenant-admin of the tenant holding it (giving its own nodes back)."""
    human(who)
    with ctx.db.write() as s:
        r = s.get(ReservationRow, res_id)
        if r is None:
            raise not_found(f"reservation {res_id}")
        if not (who.is_admin or (who.role is Role.TENANT_ADMIN and who.sees(r.tenant))):
            raise forbidden(f"{who.user} ({who.role}) may not cancel reservation {res_id}")
        s.delete(r)
    ctx.loop.wake()

"""Rental plans: a tenant rents cards of a model for hours, days, months or a year (admins
make and cancel them; finance and the tenant's admins read them). An active plan adds its
cards to the tenant's guaranteed quota (``snapshot.tenant_tree``); invoices bill its locked
price and only what is used beyond it."""

import time
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpupool.billing.money import cny, to_fen
from gpupool.billing.plans import PAYMENTS, PLANS, new_plan
from gpupool.model import SpecError, canonical_model
from gpupool.server.auth import Role
from gpupool.server.db.tables import DeviceRow, RentalPlanRow, TenantRow
from gpupool.server.deps import Caller, Ctx, Id, require
from gpupool.server.errors import ApiError, not_found
from gpupool.server.invoicing import catalog
from gpupool.server.rentals import plan_of
from gpupool.server.routes.billing import BACKDATE_SLACK_S, READERS, iso_utc
from gpupool.server.schemas import Strict, TenantName

router = APIRouter(prefix="/api/v1/billing", tags=["billing"])


class PlanIn(Strict):
    tenant: TenantName
    model: str = Field(min_length=1, max_length=100, examples=["A100-80G"])
    cards: int = Field(ge=1, le=100_000)
    plan: str = Field(examples=list(PLANS), description=" | ".join(PLANS))
    periods: int = Field(1, ge=1, le=10_000)
    start: datetime | None = Field(None, description="ISO 8601 with a zone; default now")
    payment: str | None = Field(
        None,
        examples=list(PAYMENTS),
        description="upfront (all of it the month it starts) or monthly (prorated); "
        "default: upfront for annual plans, monthly for the others",
    )


class PlanOut(BaseModel):
    id: int
    tenant: str
    model: str
    cards: int
    plan: str
    periods: int
    start: str
    end: str
    total: str
    payment: str
    owed: str = Field(description="what it bills in all: its total, or less if cancelled early")
    cancelled_at: str | None
    active: bool


def _out(r: RentalPlanRow, now: float) -> PlanOut:
    plan = plan_of(r)
    return PlanOut(
        id=r.id,
        tenant=r.tenant,
        model=r.model,
        cards=r.cards,
        plan=r.kind,
        periods=r.periods,
        start=iso_utc(r.start),
        end=iso_utc(r.end),
        total=cny(r.total_fen),
        payment=r.payment,
        owed=cny(to_fen(plan.owed())),
        cancelled_at=iso_utc(r.cancelled_at) if r.cancelled_at is not None else None,
        active=plan.active(now),
    )


@router.post("/plans", response_model=PlanOut, status_code=201)
def create_plan(body: PlanIn, ctx: Ctx, who: Caller, request: Request) -> PlanOut:
    """Rent cards to a tenant (admins): priced from the catalog now and locked."""
    require(who, (Role.ADMIN,), "making rental plans")
    now = time.time()
    if body.start is not None and body.start.tzinfo is None:
        raise ApiError(422, "start: give a time zone (e.g. Z or +08:00)", "start")
    start = body.start.timestamp() if body.start else now
    if start < now - BACKDATE_SLACK_S:
        raise ApiError(422, "start: in the past; a plan starts now or later", "start")
    with ctx.db.write() as s:
        if s.get(TenantRow, body.tenant) is None:
            raise ApiError(422, f"tenant: unknown tenant {body.tenant!r}", "tenant")
        try:
            plan = new_plan(
                catalog(s),
                0,
                body.tenant,
                canonical_model(body.model),
                body.cards,
                body.plan,
                body.periods,
                start,
                body.payment,
            )
        except SpecError as exc:
            raise ApiError(422, str(exc), exc.field or "plan") from None
        _check_capacity(s, plan.model, plan.cards, plan.start, plan.end)
        row = RentalPlanRow(
            tenant=plan.tenant,
            model=plan.model,
            cards=plan.cards,
            kind=body.plan,
            periods=body.periods,
            start=plan.start,
            end=plan.end,
            total_fen=plan.total_fen,
            payment=plan.payment,
            cancelled_at=None,
            created_by=who.user,
            created_at=now,
        )
        s.add(row)
        s.flush()
        out = _out(row, now)
    request.state.audit_target = f"plan {out.id} for {body.tenant}"
    ctx.capacity.invalidate()  # guarantees changed
    ctx.loop.wake()
    return out


def _check_capacity(s: Session, model: str, cards: int, start: float, end: float) -> None:
    """A plan is a guarantee: refuse one the pool could not honour next to the plans already
    sold for the same cards over an overlapping time (no overbooking)."""
    pool = s.execute(select(func.count()).where(DeviceRow.model == model)).scalar_one()
    if pool == 0:
        raise ApiError(422, f"model: no {model} card in the pool", "model")
    overlapping = s.execute(
        select(RentalPlanRow).where(
            RentalPlanRow.model == model, RentalPlanRow.start < end, RentalPlanRow.end > start
        )
    ).scalars()
    rented = sum(r.cards for r in overlapping if plan_of(r).until > start)
    if rented + cards > pool:
        raise ApiError(
            409,
            f"cards: overbooked: the pool has {pool} {model} cards and plans already rent "
            f"{rented} of them over that time",
            "cards",
        )


@router.get("/plans", response_model=list[PlanOut])
def list_plans(
    ctx: Ctx, who: Caller, tenant: Annotated[str | None, Query(max_length=100)] = None
) -> list[PlanOut]:
    """Plans of the tenants the caller may read (finance and admins: all)."""
    require(who, READERS, "reading rental plans")
    now = time.time()
    q = select(RentalPlanRow).order_by(RentalPlanRow.id)
    if tenant is not None:
        q = q.where(RentalPlanRow.tenant == tenant)
    with ctx.db.read() as s:
        return [_out(r, now) for r in s.execute(q).scalars() if who.sees(r.tenant)]


@router.post("/plans/{plan_id}/cancel", response_model=PlanOut)
def cancel_plan(plan_id: Id, ctx: Ctx, who: Caller, request: Request) -> PlanOut:
    """End a plan now (admins): its guarantee ends; it owes every period it started (an
    annual plan: every month, without the annual discount), never more than its total."""
    require(who, (Role.ADMIN,), "cancelling rental plans")
    now = time.time()
    with ctx.db.write() as s:
        row = s.get(RentalPlanRow, plan_id, with_for_update=True)
        if row is None:
            raise not_found(f"plan {plan_id}")
        if row.cancelled_at is not None or row.end <= now:
            raise ApiError(409, f"plan {plan_id} has already ended", "plan")
        row.cancelled_at = max(now, row.start)
        out = _out(row, now)
    request.state.audit_target = f"plan {plan_id}"
    ctx.capacity.invalidate()
    ctx.loop.wake()
    return out

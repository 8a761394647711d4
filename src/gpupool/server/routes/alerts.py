"""Alerts (operations and billing) and budgets: list alerts; set a tenant's monthly budget
with its thresholds and action."""

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field
from sqlalchemy import select

from gpupool.billing.money import cny
from gpupool.server.auth import Role
from gpupool.server.db.tables import AlertRow, BudgetRow, TenantRow
from gpupool.server.deps import Caller, Ctx, Limit, human, require
from gpupool.server.errors import ApiError, forbidden, not_found
from gpupool.server.routes.billing import READERS, iso_utc, positive_fen
from gpupool.server.schemas import Strict

router = APIRouter(prefix="/api/v1", tags=["alerts"])


class AlertOut(BaseModel):
    id: int
    kind: str
    tenant: str | None
    subject: str
    message: str
    state: str
    started_at: str
    resolved_at: str | None
    delivered: bool
    last_error: str


@router.get("/alerts", response_model=list[AlertOut])
def list_alerts(
    ctx: Ctx,
    who: Caller,
    state: Annotated[Literal["firing", "resolved", "all"], Query()] = "firing",
    limit: Limit = 100,
) -> list[AlertOut]:
    """Alerts, newest first: admins see all; others those of the tenants they may see
    (operations alerts without a tenant are for admins)."""
    human(who)
    q = select(AlertRow).order_by(AlertRow.id.desc())
    if state != "all":
        q = q.where(AlertRow.state == state)
    with ctx.db.read() as s:
        rows = [
            r
            for r in s.execute(q).scalars()
            if who.is_admin or (r.tenant is not None and who.sees(r.tenant))
        ][:limit]
        return [
            AlertOut(
                id=r.id,
                kind=r.kind,
                tenant=r.tenant,
                subject=r.subject,
                message=r.message,
                state=r.state,
                started_at=iso_utc(r.started_at),
                resolved_at=iso_utc(r.resolved_at) if r.resolved_at is not None else None,
                delivered=r.notified == r.state,
                last_error=r.last_error,
            )
            for r in rows
        ]


@router.get("/alerts/rules")
def alert_rules(ctx: Ctx, who: Caller) -> list[dict[str, object]]:
    """The conditions the server alerts on, with this server's limits (its settings; budgets
    carry their own thresholds), and whether alerts go to a webhook."""
    human(who)
    st = ctx.settings
    webhook = bool(st.alert_webhook_url)
    limits = {
        "node-lost": st.heartbeat_timeout_s,
        "device-unhealthy": None,
        "device-hot": st.alert_temp_c,
        "card-idle": st.alert_idle_minutes,
        "job-pending": st.alert_pending_minutes,
        "quota-exhausted": None,
        "budget": None,
    }
    return [{"kind": k, "limit": v, "webhook": webhook} for k, v in limits.items()]


class BudgetIn(Strict):
    monthly: str = Field(max_length=40, description="CNY a month, e.g. 10000")
    thresholds: list[int] = Field([80, 100], min_length=1, max_length=10)
    action: Literal["notify", "stop-elastic"] = Field(
        "notify", description="at 100%: notify only, or stop work beyond the guarantee"
    )


class BudgetOut(BaseModel):
    tenant: str
    monthly: str
    thresholds: list[int]
    action: str


@router.put("/billing/budgets/{tenant}", response_model=BudgetOut)
def set_budget(tenant: str, body: BudgetIn, ctx: Ctx, who: Caller, request: Request) -> BudgetOut:
    """A tenant's monthly budget (admins and finance): alerts at each threshold percent;
    ``stop-elastic`` stops its work beyond the guarantee once it is spent."""
    require(who, (Role.ADMIN, Role.FINANCE), "setting budgets")
    if not who.sees(tenant):
        raise forbidden(f"{who.user} may not set tenant {tenant}'s budget")
    fen = positive_fen(body.monthly, "monthly", "a budget")
    if any(not 1 <= t <= 1000 for t in body.thresholds):
        raise ApiError(422, "thresholds: percentages from 1 to 1000", "thresholds")
    with ctx.db.write() as s:
        if s.get(TenantRow, tenant) is None:
            raise not_found(f"tenant {tenant}")
        row = s.get(BudgetRow, tenant) or BudgetRow(tenant=tenant)
        row.monthly_fen, row.thresholds, row.action = fen, sorted(set(body.thresholds)), body.action
        s.add(row)
        out = BudgetOut(
            tenant=tenant, monthly=cny(fen), thresholds=row.thresholds, action=row.action
        )
    request.state.audit_target = f"budget of {tenant}"
    return out


@router.get("/billing/budgets", response_model=list[BudgetOut])
def list_budgets(ctx: Ctx, who: Caller) -> list[BudgetOut]:
    require(who, READERS, "reading budgets")
    with ctx.db.read() as s:
        rows = s.execute(select(BudgetRow).order_by(BudgetRow.tenant)).scalars()
        return [
            BudgetOut(
                tenant=r.tenant,
                monthly=cny(r.monthly_fen),
                thresholds=r.thresholds,
                action=r.action,
            )
            for r in rows
            if who.sees(r.tenant)
        ]

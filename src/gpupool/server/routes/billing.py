"""Billing: the price catalog (admins edit it, everyone reads it) and monthly invoices from
the usage records (finance reads every tenant's, a tenant-admin its subtree's). The money
maths is ``gpupool.billing``; this module only reads and writes rows."""

import time
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field, StringConstraints
from sqlalchemy import select

from gpupool.billing.catalog import Price
from gpupool.billing.invoice import MODES, month_bounds
from gpupool.billing.money import cny, parse_cny
from gpupool.billing.plans import unit_price
from gpupool.model import SpecError, canonical_model
from gpupool.model.devices import catalog_entry
from gpupool.server.auth import Principal, Role
from gpupool.server.db.tables import (
    CreditRow,
    DeviceRow,
    PriceRow,
    PriorityClassRow,
    TenantBillingRow,
    TenantRow,
)
from gpupool.server.deps import Caller, Ctx, human, require
from gpupool.server.errors import ApiError, forbidden, not_found
from gpupool.server.invoice_documents import Format, invoice_response
from gpupool.server.invoicing import catalog, month_invoice, sub_teams_of
from gpupool.server.issuing import is_final
from gpupool.server.schemas import Strict

router = APIRouter(prefix="/api/v1/billing", tags=["billing"])
READERS = (Role.ADMIN, Role.FINANCE, Role.TENANT_ADMIN)
BACKDATE_SLACK_S = 60  # clocks differ a little; a closed month never changes
BillingZone = Annotated[
    str | None,
    Query(
        max_length=64,
        description="the time zone a month is in (default: the server's billing_zone)",
    ),
]


class PriceIn(Strict):
    monthly: str = Field(max_length=40, description="CNY per card-month, e.g. 2500 or 2500.00")
    hourly: str | None = Field(
        None, max_length=40, description="CNY per card-hour (default: monthly / 720)"
    )
    effective_from: datetime | None = Field(
        None, description="ISO 8601; default now; never in the past"
    )


class PriceOut(BaseModel):
    model: str
    monthly: str
    hourly: str
    effective_from: str
    source: Literal["list", "set"]


def company_wide(who: Principal, what: str) -> None:
    """Admins and finance without a tenant only: finance of one team would credit its own
    bill, or issue every team's."""
    require(who, (Role.ADMIN, Role.FINANCE), what)
    if who.tenant is not None:
        raise forbidden(
            f"{what} need an admin or company-wide finance; {who.user} is "
            f"{who.role} of tenant {who.tenant}"
        )


def positive_fen(text: str, field: str, what: str) -> int:
    """An amount of CNY from a request, in fen, above zero; else a 422 naming ``field``."""
    try:
        fen = parse_cny(text)
    except SpecError as exc:
        raise ApiError(422, f"{field}: {exc}", field) from None
    if fen <= 0:
        raise ApiError(422, f"{field}: {what} must be above zero", field)
    return fen


def iso_utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@router.get("/prices", response_model=list[PriceOut])
def list_prices(ctx: Ctx, who: Caller) -> list[PriceOut]:
    """Every model's prices: the list price, and each price set since, with its date."""
    human(who)
    with ctx.db.read() as s:
        cat = catalog(s)
    out = []
    for model, entries in sorted(cat.by_model.items()):
        for p in entries:
            out.append(
                PriceOut(
                    model=model,
                    monthly=cny(p.monthly_fen),
                    hourly=_hourly(p),
                    effective_from=iso_utc(p.effective_from),
                    source="list" if p.effective_from == 0 and p.hourly_fen is None else "set",
                )
            )
    return out


def known_model(ctx: Ctx, model: str) -> str:
    """The catalog's name of ``model``, or a model some node of the pool has; anything else
    is a 422 (a price for a model nobody has is a typo, and an unbounded name a stored one)."""
    if len(model) > 100:
        raise ApiError(422, "model: longer than 100 characters", "model")
    try:
        name = canonical_model(model)
    except SpecError as exc:
        raise ApiError(422, f"model: {exc}", "model") from None
    if catalog_entry(name) is not None:
        return name
    with ctx.db.read() as s:
        found = s.execute(select(DeviceRow.model).where(DeviceRow.model == name).limit(1)).first()
    if found is None:
        raise ApiError(
            422, f"model: {name[:40]!r} is neither in the catalog nor on any node", "model"
        )
    return name


def _hourly(p: Price) -> str:
    return unit_price(p.hourly())


@router.put("/prices/{model}", response_model=PriceOut, status_code=201)
def set_price(model: str, body: PriceIn, ctx: Ctx, who: Caller, request: Request) -> PriceOut:
    """A new price for a model from a date (admins). Earlier usage keeps its price: a price
    never starts in the past."""
    require(who, (Role.ADMIN,), "setting prices")
    now = time.time()
    name = known_model(ctx, model)
    monthly = positive_fen(body.monthly, "monthly", "a price")
    hourly = positive_fen(body.hourly, "hourly", "a price") if body.hourly is not None else None
    start = body.effective_from.timestamp() if body.effective_from else now
    if body.effective_from is not None and body.effective_from.tzinfo is None:
        raise ApiError(422, "effective_from: give a time zone (e.g. Z or +08:00)", "effective_from")
    if start < now - BACKDATE_SLACK_S:
        raise ApiError(
            422,
            "effective_from: in the past; a price change never alters usage already metered",
            "effective_from",
        )
    with ctx.db.write() as s:
        s.add(
            PriceRow(
                model=name,
                monthly_fen=monthly,
                hourly_fen=hourly,
                effective_from=start,
                created_by=who.user,
                created_at=now,
            )
        )
    request.state.audit_target = f"price {name} from {iso_utc(start)}"
    p = Price(name, monthly, start, hourly)
    return PriceOut(
        model=name,
        monthly=cny(monthly),
        hourly=_hourly(p),
        effective_from=iso_utc(start),
        source="set",
    )


@router.get("/invoice", response_model=None)
def get_invoice(
    ctx: Ctx,
    who: Caller,
    tenant: Annotated[str, Query(max_length=100)],
    month: Annotated[str, Query(pattern=r"^\d{4}-\d{2}$", description="YYYY-MM")],
    zone: BillingZone = None,
    mode: Annotated[
        str | None, Query(description=" | ".join(MODES) + " (default: the tenant's)")
    ] = None,
    format: Annotated[Format, Query(description="json, csv, html or pdf")] = "json",
    lang: Annotated[Literal["zh", "en"], Query(description="html: Chinese or English")] = "zh",
) -> dict | Response:
    """A tenant's invoice for a calendar month in ``zone``: one line per GPU model and price,
    from the usage records plus what running jobs used up to now (``as_of``), the one way
    every view counts a period; while the month is open it is a draft, "so far". JSON, CSV,
    a printable page in Chinese or English (``format=html``, ``lang``) or that page as PDF
    (``format=pdf``). Finance and admins read any tenant's, a tenant-admin its subtree's."""
    require(who, READERS, "reading invoices")
    if not who.sees(tenant):
        raise forbidden(f"{who.user} may not read tenant {tenant}'s invoices")
    if mode is not None and mode not in MODES:
        raise ApiError(422, f"mode: {mode!r} is not one of {', '.join(MODES)}", "mode")
    zone = zone or ctx.settings.billing_zone
    try:
        start, end = month_bounds(month, zone)
    except SpecError as exc:
        raise ApiError(422, str(exc), exc.field or "month") from None
    now = time.time()
    with ctx.db.read() as s:
        if s.get(TenantRow, tenant) is None:
            raise not_found(f"tenant {tenant}")
        try:
            out = month_invoice(
                s, tenant, month, zone, mode, live_until=now, issuer=ctx.settings.invoice_issuer
            )
            teams = sub_teams_of(s, tenant, month, zone, now)
            if teams:  # a parent lists what its sub-teams' own invoices say
                out["sub_teams"] = teams
        except SpecError as exc:
            raise ApiError(422, str(exc), exc.field or "prices") from None
    out["draft"] = end > now
    out["as_of"] = now
    out["period"] = {"start": iso_utc(start), "end": iso_utc(end)}
    return invoice_response(out, format, lang)


class TenantBillingIn(Strict):
    mode: Literal["card-hour", "gpu-mem", "per-task"] = "card-hour"
    kind: Literal["chargeback", "showback"] = Field(
        "chargeback", description="chargeback: invoiced (renters); showback: cost reports only"
    )
    task_prices: dict[
        Annotated[str, StringConstraints(max_length=100)],
        Annotated[str, StringConstraints(max_length=40)],
    ] = Field(
        default_factory=dict, max_length=100, description="per-task mode: CNY per job by class"
    )
    discount_pct: int = Field(0, ge=0, le=100, description="off usage lines (not plans)")


class TenantBillingOut(BaseModel):
    tenant: str
    mode: str
    kind: str
    task_prices: dict[str, str]
    discount_pct: int = 0


def _settings_out(tenant: str, row: TenantBillingRow | None) -> TenantBillingOut:
    if row is None:
        return TenantBillingOut(tenant=tenant, mode="card-hour", kind="chargeback", task_prices={})
    prices = {k: cny(v) for k, v in sorted(row.task_prices.items())}
    return TenantBillingOut(
        tenant=tenant,
        mode=row.mode,
        kind=row.kind,
        task_prices=prices,
        discount_pct=row.discount_pct or 0,
    )


@router.get("/tenants/{name}", response_model=TenantBillingOut)
def get_tenant_billing(name: str, ctx: Ctx, who: Caller) -> TenantBillingOut:
    """How a tenant is billed (default: card-hour, chargeback)."""
    require(who, READERS, "reading billing settings")
    if not who.sees(name):
        raise forbidden(f"{who.user} may not read tenant {name}'s billing")
    with ctx.db.read() as s:
        if s.get(TenantRow, name) is None:
            raise not_found(f"tenant {name}")
        return _settings_out(name, s.get(TenantBillingRow, name))


@router.put("/tenants/{name}", response_model=TenantBillingOut)
def set_tenant_billing(
    name: str, body: TenantBillingIn, ctx: Ctx, who: Caller, request: Request
) -> TenantBillingOut:
    """Set a tenant's billing mode, chargeback or showback, and per-task prices (admins)."""
    require(who, (Role.ADMIN,), "changing billing settings")
    try:
        prices = {klass: parse_cny(text) for klass, text in body.task_prices.items()}
    except SpecError as exc:
        raise ApiError(422, f"task_prices: {exc}", "task_prices") from None
    with ctx.db.write() as s:
        if s.get(TenantRow, name) is None:
            raise not_found(f"tenant {name}")
        if body.mode == "per-task":
            classes = set(s.execute(select(PriorityClassRow.name)).scalars())
            missing = sorted(classes - set(prices))
            if missing:
                raise ApiError(
                    422,
                    f"task_prices: per-task billing needs a price for every class; missing "
                    f"{', '.join(missing)}",
                    "task_prices",
                )
        row = s.get(TenantBillingRow, name) or TenantBillingRow(tenant=name)
        row.mode, row.kind, row.task_prices = body.mode, body.kind, prices
        row.discount_pct = body.discount_pct
        s.add(row)
        out = _settings_out(name, row)
    request.state.audit_target = f"billing of {name}"
    return out


class CreditIn(Strict):
    tenant: str = Field(min_length=1, max_length=100)
    month: str = Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="YYYY-MM")
    amount: str = Field(max_length=40, description="CNY taken off that month's invoice")
    reason: str = Field(min_length=1, max_length=500)


class CreditOut(BaseModel):
    id: int
    tenant: str
    month: str
    amount: str
    reason: str
    created_by: str


@router.post("/credits", response_model=CreditOut, status_code=201)
def add_credit(body: CreditIn, ctx: Ctx, who: Caller, request: Request) -> CreditOut:
    """Take an amount off a tenant's invoice for a month (admins and finance)."""
    company_wide(who, "credits")
    fen = positive_fen(body.amount, "amount", "a credit")
    with ctx.db.write() as s:
        if s.get(TenantRow, body.tenant) is None:
            raise ApiError(422, f"tenant: unknown tenant {body.tenant!r}", "tenant")
        if is_final(s, body.tenant, body.month):
            raise ApiError(
                409,
                f"month: {body.tenant}'s {body.month} invoice is final and never changes; "
                "give the credit on a later month",
                "month",
            )
        row = CreditRow(
            tenant=body.tenant,
            month=body.month,
            amount_fen=fen,
            reason=body.reason,
            created_by=who.user,
            created_at=time.time(),
        )
        s.add(row)
        s.flush()
        out = CreditOut(
            id=row.id,
            tenant=row.tenant,
            month=row.month,
            amount=cny(fen),
            reason=row.reason,
            created_by=row.created_by,
        )
    request.state.audit_target = f"credit {out.id} for {body.tenant}"
    return out

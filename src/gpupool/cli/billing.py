"""``gpupool billing``: what renting cards costs (quotes), the price catalog, invoices."""

import json
from datetime import UTC, datetime
from typing import Any

import typer
from rich.console import Console

from gpupool.billing.catalog import Catalog
from gpupool.billing.plans import PLANS, quote
from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.invoices import register_issuing, save_document
from gpupool.cli.output import SafeTable, emit, epoch, local, show, zone_now, zoned
from gpupool.client import ApiClient

# one rule for every month a command takes (docs/billing.md, "Months")
ZONE_HELP = "The time zone its month is in [default: the server's billing zone, Asia/Shanghai]"

billing_app = typer.Typer(
    help="Prices, quotes, rental plans, invoices (month-end: issue), budgets and reports (CNY)."
)


@billing_app.command("quote")
@client_command
def billing_quote(
    model: str = typer.Option(..., help="GPU model, e.g. A100-80G, T4, H100-80G"),
    cards: int = typer.Option(1, help="How many cards"),
    plan: str = typer.Option("monthly", help=f"One of {', '.join(PLANS)} (annual: 15% off)"),
    periods: int = typer.Option(1, help="How many hours, days, months or years"),
    as_json: bool = JSON_OPT,
) -> None:
    """Price a rental from the list prices: gpupool billing quote --model A100-80G --cards 1
    --plan annual (2,500 x 12 x 0.85 = 25,500.00)."""
    import time

    out = quote(Catalog.default(), model, cards, plan, periods, time.time())
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    t = SafeTable("line", "quantity", "unit", "unit price", "amount", box=None, header_style="bold")
    for line in out["lines"]:
        t.add_row(
            line["description"], line["quantity"], line["unit"], line["unit_price"], line["amount"]
        )
    t.caption = f"total ¥{out['total']} (CNY, list prices)"
    Console().print(t)


@billing_app.command("prices")
@client_command
def billing_prices(as_json: bool = JSON_OPT) -> None:
    """The price catalog: each model's list price and every price set since, with its date."""
    with ApiClient.from_env() as api:
        rows = api.get("/api/v1/billing/prices")

    def cell(r: dict, c: str) -> str:
        if c != "effective_from":
            return str(r[c])
        return "always" if r["source"] == "list" else local(epoch(r[c]))

    emit(
        rows,
        ["model", "monthly", "hourly", "effective_from", "source"],
        as_json=as_json,
        cell=cell,
        headers={"effective_from": "from"},
        caption=f"CNY per card; hourly = monthly / 720 unless set; from: {zone_now()}",
    )


@billing_app.command("set-price")
@client_command
def billing_set_price(
    model: str = typer.Argument(..., help="GPU model, e.g. A100-80G"),
    monthly: str = typer.Option(..., help="CNY per card-month, e.g. 2300"),
    hourly: str = typer.Option(None, help="CNY per card-hour (default: monthly / 720)"),
    start: str = typer.Option(
        None, "--from", help="ISO date/time it applies from, in your zone (TZ) [default: now]"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Change a model's price from now or a later date (admins); usage before it keeps the
    old price."""
    import time

    from gpupool.cli.admin_client import _when

    body: dict[str, Any] = {"monthly": monthly, "hourly": hourly}
    if start is not None:
        when = _when(start, "from")
        body["effective_from"] = datetime.fromtimestamp(when or time.time(), UTC).isoformat()
    with ApiClient.from_env() as api:
        out = api.put(f"/api/v1/billing/prices/{model}", body)
    show(
        out,
        as_json,
        f"{out['model']}: ¥{out['monthly']} a card-month (¥{out['hourly']} an "
        f"hour) from {zoned(epoch(out['effective_from']))}",
    )


@billing_app.command("invoice")
@client_command
def billing_invoice(
    tenant: str = typer.Option(..., help="The tenant billed"),
    month: str = typer.Option(..., help="YYYY-MM"),
    zone: str = typer.Option(None, help=ZONE_HELP),
    mode: str = typer.Option(
        None, help="card-hour, gpu-mem (GB-hours) or per-task (default: the tenant's mode)"
    ),
    as_csv: bool = typer.Option(False, "--csv", help="Print CSV"),
    html: str = typer.Option(
        None, "--html", help="Write the printable page to this file (see --lang)"
    ),
    pdf: str = typer.Option(None, "--pdf", help="Write the page as PDF to this file"),
    lang: str = typer.Option("zh", help="The printable page's language: zh or en"),
    as_json: bool = JSON_OPT,
) -> None:
    """A tenant's monthly invoice from its metered usage: one line per rental plan, then per
    GPU model and price (finance, admins, or a tenant-admin for its subtree). The month's
    issued invoices: gpupool billing issue / invoices."""
    params = {"tenant": tenant, "month": month, "zone": zone, "mode": mode}
    with ApiClient.from_env() as api:
        if as_csv:
            typer.echo(api.get("/api/v1/billing/invoice", format="csv", **params), nl=False)
            return
        for path, fmt in ((html, "html"), (pdf, "pdf")):
            if path is not None:
                save_document(api, "/api/v1/billing/invoice", path, format=fmt, lang=lang, **params)
                typer.echo(f"invoice written to {path}")
                return
        out = api.get("/api/v1/billing/invoice", **params)
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    draft = f" (so far, to {zoned(out['as_of'])}: the month is not over)" if out["draft"] else ""
    emit(
        out["lines"],
        ["description", "quantity", "unit", "unit_price", "amount"],
        title=f"{tenant} {month} ({out['zone']}){draft}",
        headers={"unit_price": "unit price"},
        caption=f"total ¥{out['total']} CNY",
    )
    if not out["lines"]:
        typer.echo("no metered GPU usage in that month")


plan_app = typer.Typer(help="Rental plans: cards rented to a tenant, guaranteed while active.")
billing_app.add_typer(plan_app, name="plan")
PLAN_COLUMNS = ["id", "tenant", "model", "cards", "plan", "start", "end", "total", "active"]


@plan_app.command("create")
@client_command
def plan_create(
    tenant: str = typer.Option(..., help="Who rents the cards"),
    model: str = typer.Option(..., help="GPU model, e.g. A100-80G"),
    cards: int = typer.Option(..., help="How many cards"),
    plan: str = typer.Option("monthly", help=f"One of {', '.join(PLANS)} (annual: 15% off)"),
    periods: int = typer.Option(1, help="How many hours, days, months or years"),
    start: str = typer.Option(
        None, help="When it starts: ISO date/time (in your zone, TZ) or a duration from now"
    ),
    payment: str = typer.Option(
        None, help="upfront or monthly (default: upfront for annual plans, else monthly)"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Rent cards to a tenant (admins): its guaranteed quota grows by them while the plan is
    active, at the price quoted now; use beyond them is billed on demand. A plan commits to
    its whole term; cancelled early it owes every period it started (annual: every month,
    without the discount)."""
    from gpupool.cli.admin_client import _when

    body: dict[str, Any] = {
        "tenant": tenant,
        "model": model,
        "cards": cards,
        "plan": plan,
        "periods": periods,
        "payment": payment,
    }
    if start is not None:
        body["start"] = datetime.fromtimestamp(_when(start, "start") or 0, UTC).isoformat()
    with ApiClient.from_env() as api:
        out = api.post("/api/v1/billing/plans", body)
    show(
        out,
        as_json,
        f"plan {out['id']}: {out['cards']} x {out['model']} for {out['tenant']}, "
        f"from {zoned(epoch(out['start']))} to {zoned(epoch(out['end']))}, ¥{out['total']}",
    )


@plan_app.command("list")
@client_command
def plan_list(
    tenant: str = typer.Option(None, help="Only this tenant's"), as_json: bool = JSON_OPT
) -> None:
    """Rental plans you may read (finance and admins: all)."""
    with ApiClient.from_env() as api:
        rows = api.get("/api/v1/billing/plans", tenant=tenant)
    emit(
        rows,
        PLAN_COLUMNS,
        as_json=as_json,
        cell=_plan_cell,
        empty="no rental plan",
        caption=f"start, end: the day in your zone ({zone_now()}); --json has the time",
    )


def _plan_cell(row: dict, column: str) -> str:
    value = row[column]
    if column in ("start", "end"):
        return local(epoch(value))[:10]  # the day, the user's; --json has the time
    if column == "plan":  # short, so a line fits 80 columns
        return {"hourly": "hour", "daily": "day", "monthly": "month", "annual": "year"}[value]
    if column == "active":
        return "yes" if value else ("cancelled" if row["cancelled_at"] else "no")
    return str(value)


@plan_app.command("cancel")
@client_command
def plan_cancel(plan_id: int = typer.Argument(...), as_json: bool = JSON_OPT) -> None:
    """End a plan now (admins): its guarantee ends; it owes every period it started (annual:
    every month, without the discount), never more than its total."""
    with ApiClient.from_env() as api:
        out = api.post(f"/api/v1/billing/plans/{plan_id}/cancel")
    show(
        out,
        as_json,
        f"plan {plan_id} cancelled at {zoned(epoch(out['cancelled_at']))}; it owes "
        f"¥{out['owed']} of "
        f"¥{out['total']}",
    )


REPORT_COLUMNS = {
    "usage": ["day", "tenant", "model", "card_hours"],
    "top-jobs": ["job_id", "tenant", "card_hours", "cost"],
    "idle": ["tenant", "idle_card_hours", "idle_cost", "interactive_idle_card_hours"],
}


@billing_app.command("report")
@client_command
def billing_report(
    report: str = typer.Argument(..., help="usage, top-jobs or idle"),
    month: str = typer.Option(..., help="YYYY-MM"),
    zone: str = typer.Option(None, help=ZONE_HELP),
    tenant: str = typer.Option(None, help="Only this tenant"),
    limit: int = typer.Option(10, help="top-jobs: how many"),
    as_csv: bool = typer.Option(False, "--csv", help="Print CSV"),
    as_json: bool = JSON_OPT,
) -> None:
    """Cost reports: usage (card-hours per tenant, model and day), top-jobs (the jobs that
    cost the most at list prices), idle (card-hours held under 5% utilisation, their
    cost, and those interactive sessions held)."""
    from gpupool.model import SpecError

    if report not in REPORT_COLUMNS:
        raise SpecError(f"report: {report!r} is not one of {', '.join(REPORT_COLUMNS)}")
    with ApiClient.from_env() as api:
        out = api.get(
            f"/api/v1/billing/reports/{report}",
            month=month,
            zone=zone,
            tenant=tenant,
            limit=limit,
        )
    so_far = f", so far: to {zoned(out['as_of'])}" if out.get("draft") else ""
    emit(
        out["items"],
        REPORT_COLUMNS[report],
        as_json=as_json,
        as_csv=as_csv,
        title=f"{report} {month} ({out['zone']}){so_far}",
        empty=f"nothing to report for {month} ({out['zone']}){so_far}",
    )


@billing_app.command("usage")
@client_command
def billing_usage(
    month: str = typer.Option(..., help="YYYY-MM"),
    zone: str = typer.Option(None, help=ZONE_HELP),
    tenant: str = typer.Option(None, help="Only this tenant"),
    as_csv: bool = typer.Option(False, "--csv", help="Print CSV"),
    as_json: bool = JSON_OPT,
) -> None:
    """Card-hours per tenant, GPU model and day (the same as gpupool billing report usage)."""
    billing_report("usage", month, zone, tenant, 10, as_csv, as_json)


@billing_app.command("settings")
@client_command
def billing_settings(
    tenant: str = typer.Argument(..., help="The tenant"),
    mode: str = typer.Option(None, help="card-hour, gpu-mem or per-task"),
    kind: str = typer.Option(None, help="chargeback (invoiced) or showback (reports only)"),
    task_price: list[str] = typer.Option(
        None, "--task-price", help="per-task: CLASS=CNY, e.g. training=20 (repeat)"
    ),
    discount: int = typer.Option(None, help="Percent off usage lines (not plans)"),
    as_json: bool = JSON_OPT,
) -> None:
    """Show how a tenant is billed, or change it (admins) with --mode, --kind, --task-price."""
    from gpupool.model import SpecError

    with ApiClient.from_env() as api:
        path = f"/api/v1/billing/tenants/{tenant}"
        out = api.get(path)
        if mode or kind or task_price or discount is not None:
            prices = dict(out["task_prices"])
            for item in task_price or []:
                klass, sep, price = item.partition("=")
                if not sep or not klass:
                    raise SpecError(f"task-price: {item!r} is not CLASS=CNY")
                prices[klass] = price
            body = {
                "mode": mode or out["mode"],
                "kind": kind or out["kind"],
                "task_prices": prices,
                "discount_pct": out["discount_pct"] if discount is None else discount,
            }
            out = api.put(path, body)
    priced = ", ".join(f"{k} ¥{v}" for k, v in out["task_prices"].items()) or "-"
    off = f"; {out['discount_pct']}% off usage" if out["discount_pct"] else ""
    show(out, as_json, f"{tenant}: {out['mode']}, {out['kind']}{off}; per-task prices: {priced}")


@billing_app.command("budget")
@client_command
def billing_budget(
    tenant: str = typer.Argument(..., help="The tenant"),
    monthly: str = typer.Option(..., help="CNY a month, e.g. 10000"),
    thresholds: str = typer.Option("80,100", help="Percentages that alert, e.g. 50,80,100"),
    action: str = typer.Option(
        "notify", help="At 100%: notify, or stop-elastic (no work beyond the guarantee)"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Give a tenant a monthly budget (admins, finance): an alert at each threshold."""
    from gpupool.model import SpecError

    try:
        marks = [int(t) for t in thresholds.split(",") if t.strip()]
    except ValueError:
        raise SpecError(f"thresholds: {thresholds!r} is not a comma list of percentages") from None
    body = {"monthly": monthly, "thresholds": marks, "action": action}
    with ApiClient.from_env() as api:
        out = api.put(f"/api/v1/billing/budgets/{tenant}", body)
    marks_text = ", ".join(f"{t}%" for t in out["thresholds"])
    show(
        out,
        as_json,
        f"{tenant}: ¥{out['monthly']} a month, alerts at {marks_text}, at 100%: {out['action']}",
    )


@billing_app.command("credit")
@client_command
def billing_credit(
    tenant: str = typer.Argument(..., help="The tenant"),
    month: str = typer.Option(..., help="The invoice's month, YYYY-MM"),
    amount: str = typer.Option(..., help="CNY taken off, e.g. 500"),
    reason: str = typer.Option(..., help="Why (shown on the invoice)"),
    as_json: bool = JSON_OPT,
) -> None:
    """Take an amount off a tenant's invoice for a month (admins, finance)."""
    body = {"tenant": tenant, "month": month, "amount": amount, "reason": reason}
    with ApiClient.from_env() as api:
        out = api.post("/api/v1/billing/credits", body)
    show(out, as_json, f"credit {out['id']}: ¥{out['amount']} off {tenant}'s {month} invoice")


register_issuing(billing_app)

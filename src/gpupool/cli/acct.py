"""``gpupool acct`` (Slurm's sacct: finished jobs with their times, exit codes, card-hours
and CPU-hours from the usage records) and ``gpupool usage`` (a tenant's card-hours per GPU
model for a month or a window)."""

import json
import time

import typer
from rich.console import Console

from gpupool.cli.client import JSON_OPT, all_items, client_command
from gpupool.cli.output import SafeTable, emit, local, pick_columns, zone_now, zoned
from gpupool.client import ApiClient
from gpupool.model import SpecError
from gpupool.model.units import parse_point_in_time

FINISHED = ("succeeded", "failed", "cancelled")
DEFAULT_COLUMNS = ("id", "user", "tenant", "state", "start", "elapsed", "exit", "card_hours")
WHEN = "now-7d, now, an ISO date/time (in your zone, TZ, unless it names one)"


def _window(since: str, until: str) -> tuple[float, float]:
    now = time.time()
    start = parse_point_in_time(since, now, "since")
    end = parse_point_in_time(until, now, "until")
    if end <= start:
        raise SpecError("until: must be after since", field="until")
    return start, end


@client_command
def acct(
    since: str = typer.Option("now-7d", help=f"Jobs that ended from: {WHEN}"),
    until: str = typer.Option("now", help=f"…until: {WHEN}"),
    tenant: str = typer.Option(None, help="Only this tenant"),
    user: str = typer.Option(None, help="Only jobs this user submitted"),
    state: str = typer.Option(None, help="succeeded, failed or cancelled (default: all)"),
    fields: str = typer.Option(
        None,
        "--format",
        "-o",
        help="Comma list of: id, user, tenant, name, state, start, end, elapsed, exit, "
        "card_hours, cpu_hours [default: id,user,tenant,state,start,elapsed,exit,card_hours]",
    ),
    as_csv: bool = typer.Option(False, "--csv", help="Print CSV"),
    as_json: bool = JSON_OPT,
) -> None:
    """Finished jobs as sacct shows them: start, end, elapsed, exit code, card-hours (whole-
    card equivalents: shares and MIG slices count their fraction) and CPU-hours."""
    from gpupool.cli.views import ACCT_FIELDS, acct_rows

    columns = pick_columns(fields, ACCT_FIELDS, DEFAULT_COLUMNS)
    if state is not None and state not in FINISHED:
        raise SpecError(f"state: {state!r} is not one of {', '.join(FINISHED)}", field="state")
    start, end = _window(since, until)
    with ApiClient.from_env() as api:
        jobs = []
        for s in (state,) if state else FINISHED:
            jobs += all_items(api, "/api/v1/jobs", state=s, tenant=tenant)
        usage = all_items(api, "/api/v1/usage", tenant=tenant, since=start)
    jobs = [
        j
        for j in jobs
        if j["finished_at"] is not None
        and start <= j["finished_at"] < end
        and (user is None or j["submitted_by"] == user)
    ]
    rows = acct_rows(sorted(jobs, key=lambda j: j["id"]), usage)
    emit(
        rows,
        columns,
        as_json=as_json,
        as_csv=as_csv,
        cell=_cell,
        note=f"{len(rows)} jobs ended {local(start)} – {local(end)} ({zone_now()})",
        headers={"card_hours": "card-h", "cpu_hours": "cpu-h"},
    )


def _cell(row: dict, column: str) -> str:
    value = row[column]
    if column in ("start", "end"):
        return local(value)
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


@client_command
def usage(
    tenant: str = typer.Option(None, help="Only this tenant"),
    month: str = typer.Option(
        None, help="A month, e.g. 2026-11, in the billing zone (as invoices count it; see --zone)"
    ),
    since: str = typer.Option(None, help=f"From: {WHEN} (instead of --month)"),
    until: str = typer.Option("now", help=f"Until: {WHEN}"),
    zone: str = typer.Option(
        None, help="--month's time zone [default: the server's billing zone, Asia/Shanghai]"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Card-hours per tenant and GPU model (whole-card equivalents), GPU-memory GiB-hours and
    CPU-hours, released allocations plus what live ones used so far. A month is the billing
    zone's, as invoices and billing reports count it (docs/billing.md, "Months")."""
    if month and since:
        raise SpecError("give --month or --since, not both", field="month")
    if zone and not month:
        raise SpecError("zone: applies to --month only", field="zone")
    with ApiClient.from_env() as api:
        if month:
            out = api.get("/api/v1/usage/summary", month=month, zone=zone)
        else:
            start, end = _window(since or "now-30d", until)
            out = api.get("/api/v1/usage/summary", since=start, until=end)
    start, end = out["since"], out["until"]
    rows = [
        {
            "tenant": r["tenant"],
            "model": r["model"],
            "card_hours": round(r["compute_pct_seconds"] / 100 / 3600, 4),
            "gpu_mem_gib_hours": round(r["mem_mib_seconds"] / 1024 / 3600, 4),
            "cpu_hours": round(r["cpu_milli_seconds"] / 1000 / 3600, 4),
        }
        for r in out["items"]
        if tenant is None or r["tenant"] == tenant
    ]
    if as_json:
        window = {"since": start, "until": end, "zone": out.get("zone"), "as_of": out["as_of"]}
        typer.echo(json.dumps({**window, "items": rows}, indent=2))
        return
    table = SafeTable(
        "tenant", "model", "card-h", "gpu mem GiB-h", "cpu-h", box=None, header_style="bold"
    )
    for r in rows:
        table.add_row(
            r["tenant"], r["model"], f"{r['card_hours']:.2f}", f"{r['gpu_mem_gib_hours']:.1f}",
            f"{r['cpu_hours']:.2f}",
        )  # fmt: skip
    Console().print(table)
    which = f"{month} in {out['zone']}: " if month else ""
    counted = f", so far: to {zoned(out['as_of'])}" if end > out["as_of"] else ""
    typer.echo(f"{which}{zoned(start)} – {zoned(end)}{counted}")  # as wide as the terminal

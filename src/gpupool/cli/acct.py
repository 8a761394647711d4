"""``gpupool acct`` (Slurm's sacct: finished jobs with their times, exit codes, card-hours
and CPU-hours from the usage records) and ``gpupool usage`` (a tenant's card-hours per GPU
model for a month or a window)."""

import json
import time

import typer
from rich.console import Console

from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.output import SafeTable, emit, local, pick_columns, zone_now, zoned
from gpupool.client import ApiClient
from gpupool.client.paging import all_items
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
    tenant: str = typer.Option(None, "--tenant", "-A", help="Only this tenant (sacct -A)"),
    user: str = typer.Option(None, "--user", "-u", help="Only jobs this user submitted"),
    state: str = typer.Option(None, help="succeeded, failed or cancelled (default: all)"),
    jobs: str = typer.Option(
        None,
        "--jobs",
        "-j",
        help="These jobs, in any state, whenever they ended: 24,25, an "
        "array's id (every task), 24_3, 24_[1-3] (sacct -j)",
    ),
    fields: str = typer.Option(
        None,
        "--format",
        "-o",
        help="Comma list of: id, user, tenant, name, state, start, end, elapsed, exit, "
        "card_hours, cpu_hours [default: id,user,tenant,state,start,elapsed,exit,card_hours]; "
        "or sacct's fields: JobID,JobName%30,State,Elapsed,MaxRSS (any name not one of "
        "gpupool's makes it sacct's; docs/slurm.md lists them)",
    ),
    noheader: bool = typer.Option(
        False, "--noheader", "-n", help="No header lines (sacct's fields only)"
    ),
    parsable: bool = typer.Option(
        False, "--parsable", "-p", help="Fields ended by | (sacct's fields only)"
    ),
    parsable2: bool = typer.Option(
        False, "--parsable2", "-P", help="Fields separated by |, none after the last (sacct's)"
    ),
    delimiter: str = typer.Option("|", help="The separator of -p/-P"),
    allocations: bool = typer.Option(
        False, "--allocations", "-X", help="Allocations only: what is printed anyway (no steps)"
    ),
    as_csv: bool = typer.Option(False, "--csv", help="Print CSV"),
    as_json: bool = JSON_OPT,
) -> None:
    """Finished jobs as sacct shows them: start, end, elapsed, exit code, card-hours (whole-
    card equivalents: shares and MIG slices count their fraction) and CPU-hours. With sacct's
    own fields (--format=JobID,State,Elapsed) the lines sacct prints for them; -j names jobs
    in any state."""
    from gpupool.cli import slurm_cli
    from gpupool.cli.views import ACCT_FIELDS, acct_rows

    sacct = slurm_cli.is_sacct(fields, ACCT_FIELDS)
    if not sacct:
        given_flags = (
            (noheader, "--noheader"),
            (parsable, "--parsable"),
            (parsable2, "--parsable2"),
            (delimiter != "|", "--delimiter"),
        )
        for given, flag in given_flags:  # fmt: skip
            if given:
                raise SpecError(f"{flag}: applies to sacct's fields (--format=JobID,State)")
    elif as_csv or as_json:
        raise SpecError(f"{'--csv' if as_csv else '--json'}: not with sacct's fields")
    if parsable and parsable2:
        raise SpecError("give -p/--parsable or -P/--parsable2, not both", field="parsable")
    columns = [] if sacct else pick_columns(fields, ACCT_FIELDS, DEFAULT_COLUMNS)
    if state is not None and state not in FINISHED:
        raise SpecError(f"state: {state!r} is not one of {', '.join(FINISHED)}", field="state")
    refs = slurm_cli.job_refs(jobs)
    if refs is not None and (since, until) != ("now-7d", "now"):
        raise SpecError("--since/--until: not with -j/--jobs (it names jobs whenever they ended)")
    start, end = _window(since, until)
    with ApiClient.from_env() as api:
        if refs is not None:  # sacct -j: those jobs, whatever their state and end
            found = slurm_cli.named_jobs(api, refs)
        else:
            found = []
            for s in (state,) if state else FINISHED:
                found += all_items(api, "/api/v1/jobs", state=s, tenant=tenant)
            found = [j for j in found if j["finished_at"] is not None
                     and start <= j["finished_at"] < end]  # fmt: skip
        since_usage = None if refs is not None else start  # -j: whenever they ran
        deps = slurm_cli.dependency_states(api, found) if sacct else {}
        usage = [] if sacct else all_items(api, "/api/v1/usage", tenant=tenant, since=since_usage)
    found = [
        j
        for j in found
        if (user is None or j["submitted_by"] == user)
        and (tenant is None or j["tenant"] == tenant)
        and (state is None or j["state"] == state)
    ]
    found = sorted(found, key=lambda j: j["id"])
    del allocations  # every line is an allocation's: gpupool's jobs have no steps
    if sacct:
        mode = "P" if parsable2 else "p" if parsable else ""
        for line in slurm_cli.sacct_lines(found, fields, not noheader, mode, delimiter, deps):
            typer.echo(line)
        return
    rows = acct_rows(found, usage)
    emit(
        rows,
        columns,
        as_json=as_json,
        as_csv=as_csv,
        cell=_cell,
        note=f"{len(rows)} jobs named ({zone_now()})"
        if refs is not None
        else f"{len(rows)} jobs ended {local(start)} – {local(end)} ({zone_now()})",
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

"""Client commands against a running server: login, jobs, nodes, queue, tenants, quotas.
Rich tables for people, ``--json`` for programs; errors are one line and exit code 2."""

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from gpupool.cli.errors import err_console
from gpupool.client import ApiClient, ClientError, save_credentials
from gpupool.model import SpecError, parse_request
from gpupool.model.batch import Script

P = ParamSpec("P")
R = TypeVar("R")
job_app = typer.Typer(help="Submit, list, inspect and cancel jobs.")
quota_app = typer.Typer(help="Tenant quotas.")
JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of a table")


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except (ClientError, SpecError) as exc:
        err_console.print(f"[bold red]error:[/] {exc}", markup=True, soft_wrap=True)
        raise typer.Exit(code=2) from None


def client_command(fn: Callable[P, R]) -> Callable[P, R]:
    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with _errors():
            return fn(*args, **kwargs)

    return wrapper


def _print(data: Any, as_json: bool, table: Callable[[Any], Table]) -> None:
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        Console().print(table(data))


def _ago(t: float | None) -> str:
    if t is None:
        return ""
    s = max(0.0, time.time() - t)
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h"


def login(
    server: str = typer.Option("http://127.0.0.1:8080", help="Server URL"),
    token: str = typer.Option(..., prompt=True, hide_input=True, help="API token"),
) -> None:
    """Check a token against the server and save both for later commands (mode 0600)."""
    with _errors(), ApiClient(server, token) as api:
        status = api.get("/api/v1/status")
        path = save_credentials(server, token)
    typer.echo(f"logged in to {server} (gpupool {status['version']}); saved to {path}")


@job_app.command("submit")
@client_command
def job_submit(
    command: list[str] = typer.Argument(
        None, help="The command to run, after --; or a script with #GPUPOOL directive lines"
    ),
    tenant: str = typer.Option(None, help="Tenant (default: your token's)"),
    gpu: str = typer.Option(None, help="gpu=... e.g. 2, A100-80G:2"),
    gpu_mem: str = typer.Option(None, help="GPU memory per device, e.g. 20GiB"),
    gpu_share: str = typer.Option(None, help="Compute share of one card, e.g. 0.5"),
    mig: str = typer.Option(None, help="A MIG profile, e.g. 1g.10gb"),
    cpu: str = typer.Option(None, help="CPU cores, e.g. 4"),
    mem: str = typer.Option(None, help="Memory, e.g. 32GiB"),
    request: str = typer.Option(None, help="A whole request string instead of the flags above"),
    name: str = typer.Option(None, help="A name to recognise the job by"),
    kind: str = typer.Option(None, help="training, inference, dev or batch \\[default: batch]"),
    priority_class: str = typer.Option(None, help="Priority class \\[default: training]"),
    gang: int = typer.Option(None, help="Workers that must start together \\[default: 1]"),
    time_limit: str = typer.Option(
        None, "--time", "-t", help="Run time limit: MM, HH:MM:SS or D-HH:MM:SS (as sbatch)"
    ),
    max_runtime: int = typer.Option(None, help="Maximum run time in seconds (or --time)"),
    key: str = typer.Option(None, help="Idempotency key: resubmitting it returns the same job"),
    as_json: bool = JSON_OPT,
) -> None:
    """Submit a job: gpupool job submit --tenant algo --gpu 2 -- python train.py, or a script
    (as sbatch): gpupool job submit train.sh, whose leading comment lines may say
    #GPUPOOL --gpu A100-80G:2 --cpu 8 --time 4:00:00 --name train (flags given here win)."""
    from gpupool.model.batch import parse_time

    given: dict[str, Any] = {
        "tenant": tenant, "gpu": gpu, "gpu_mem": gpu_mem, "gpu_share": gpu_share, "mig": mig,
        "cpu": cpu, "mem": mem, "request": request, "name": name, "kind": kind,
        "priority_class": priority_class, "gang": gang, "time": time_limit,
    }  # fmt: skip
    argv = list(command or [])
    script = _script(argv)
    if script is not None:
        for option, value in script.options.items():
            field = option[2:].replace("-", "_")
            if given[field] is None:
                given[field] = value
        argv = script.command
    parts = [
        f"{k}={given[k]}"
        for k in ("gpu", "gpu_mem", "gpu_share", "mig", "cpu", "mem")
        if given[k] is not None
    ]
    if given["request"] and parts:
        raise SpecError("give either --request or the resource flags, not both")
    spec = given["request"] or ",".join(parts) or "cpu=1"
    parse_request(spec)  # a clear local error before any network call
    if max_runtime is None and given["time"] is not None:
        max_runtime = parse_time(str(given["time"]))
    try:
        gang_size = int(given["gang"] or 1)
    except ValueError:
        raise SpecError(f"gang: {given['gang']!r} is not a number", field="gang") from None
    body = {
        "request": spec,
        "tenant": given["tenant"],
        "name": given["name"] or "",
        "kind": given["kind"] or "batch",
        "priority_class": given["priority_class"] or "training",
        "gang_size": gang_size,
        "max_runtime_s": max_runtime,
        "command": argv,
        "idempotency_key": key,
    }
    with ApiClient.from_env() as api:
        job = api.post("/api/v1/jobs", {k: v for k, v in body.items() if v is not None})
    if as_json:
        typer.echo(json.dumps(job, indent=2))
    else:
        typer.echo(f"job {job['id']} {job['state']}: {job['request']} for {job['tenant']}")


def _script(argv: list[str]) -> Script | None:
    """A job script (sbatch-style) when the only argument is a file with a #! line or
    #GPUPOOL directives; None for a plain command."""
    from pathlib import Path

    from gpupool.model.batch import parse_script

    if len(argv) != 1 or not Path(argv[0]).is_file():
        return None
    path = Path(argv[0])
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read the script: {exc}") from None
    if not (text.startswith("#!") or "#GPUPOOL" in text):
        return None
    return parse_script(text, path.name)


def _jobs_table(page: dict[str, Any]) -> Table:
    t = Table("id", "tenant", "name", "request", "state", "age", "reason", title="jobs")
    for j in page["items"]:
        age = _ago(j["submit_time"])
        t.add_row(str(j["id"]), j["tenant"], j["name"], j["request"], j["state"], age, j["reason"])
    t.caption = f"{len(page['items'])} of {page['total']}"
    return t


@job_app.command("list")
@client_command
def job_list(
    state: str = typer.Option(None, help="Only jobs in this state"),
    tenant: str = typer.Option(None, help="Only this tenant's jobs"),
    limit: int = typer.Option(50, help="How many"),
    as_json: bool = JSON_OPT,
) -> None:
    """List jobs you may see, newest first."""
    with ApiClient.from_env() as api:
        page = api.get("/api/v1/jobs", state=state, tenant=tenant, limit=limit)
    _print(page, as_json, _jobs_table)


@job_app.command("show")
@client_command
def job_show(job_id: int, as_json: bool = JSON_OPT) -> None:
    """One job with its allocation and its state history."""
    with ApiClient.from_env() as api:
        job = api.get(f"/api/v1/jobs/{job_id}")
        job["events"] = api.get(f"/api/v1/jobs/{job_id}/events")

    def table(j: dict[str, Any]) -> Table:
        t = Table("field", "value", title=f"job {j['id']}")
        for k in ("tenant", "name", "request", "kind", "priority_class", "state", "reason"):
            t.add_row(k, str(j[k]))
        if j["allocation"]:
            for n in j["allocation"]["nodes"]:
                devs = ",".join(str(d["device"]) for d in n["devices"]) or "-"
                t.add_row("node", f"{n['node']} devices {devs}")
        for e in j["events"]:
            t.add_row(
                "event", f"{_ago(e['time'])} ago {e['from_state']} -> {e['to_state']} {e['reason']}"
            )
        return t

    _print(job, as_json, table)


LIVE = ("pending", "admitted", "running")


@job_app.command("cancel")
@client_command
def job_cancel(
    job_ids: list[int] = typer.Argument(None, help="Job ids (or select with the filters)"),
    tenant: str = typer.Option(None, help="Every live job of this tenant"),
    user: str = typer.Option(None, help="…submitted by this user"),
    state: str = typer.Option(None, help="…in this state: pending, admitted or running"),
    name: str = typer.Option(None, help="…with this name"),
    as_json: bool = JSON_OPT,
) -> None:
    """Cancel jobs (their devices are released at once), as scancel: by ids, or every live
    job that matches all the filters given."""
    ids = list(job_ids or [])
    filters = (tenant, user, state, name)
    if not ids and all(f is None for f in filters):
        raise SpecError("give job ids or at least one of --tenant, --user, --state, --name")
    if state is not None and state not in LIVE:
        raise SpecError(f"state: {state!r} is not one of {', '.join(LIVE)}", field="state")
    done = []
    with ApiClient.from_env() as api:
        if any(f is not None for f in filters):
            matched: list[int] = []
            for s in (state,) if state else LIVE:
                for j in all_items(api, "/api/v1/jobs", state=s, tenant=tenant):
                    if (user is None or j["submitted_by"] == user) and (
                        name is None or j["name"] == name
                    ):
                        matched.append(j["id"])
            # ids and filters together: the given ids that match the filters
            ids = [i for i in ids if i in set(matched)] if ids else sorted(matched)
        for job_id in dict.fromkeys(ids):
            done.append(api.post(f"/api/v1/jobs/{job_id}/cancel"))
    if as_json:
        typer.echo(json.dumps(done, indent=2))
        return
    for job in done:
        typer.echo(f"job {job['id']} {job['state']}")
    if not done:
        typer.echo("no job matched")


@job_app.command("logs")
@client_command
def job_logs(job_id: int) -> None:
    """Print a job's captured output."""
    with ApiClient.from_env() as api:
        logs = api.get(f"/api/v1/jobs/{job_id}/logs")
    for chunk in logs["chunks"]:
        typer.echo(chunk["text"], nl=False)


def all_items(api: ApiClient, path: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of a paged list (pages of 1,000)."""
    items: list[dict[str, Any]] = []
    while True:
        page = api.get(path, limit=1000, offset=len(items), **params)
        items += page["items"]
        if not page["items"] or len(items) >= page["total"]:
            return items


@client_command
def nodes(
    summary: bool = typer.Option(False, "--summary", "-s", help="Per GPU model and state"),
    long: bool = typer.Option(False, "--long", "-l", help="Add telemetry: util, memory, temp, W"),
    as_json: bool = JSON_OPT,
) -> None:
    """Nodes as sinfo shows them: state (idle, mixed, allocated, drained, lost, fenced),
    cards by model, in use and free, CPU and memory free."""
    from gpupool.cli import views

    with ApiClient.from_env() as api:
        rows = views.node_rows(
            all_items(api, "/api/v1/nodes"), all_items(api, "/api/v1/allocations", state="active")
        )
    if summary:
        groups = views.summary(rows)
        t = Table(
            "model", "state", "nodes", "cards", "in use", "free", box=None, header_style="bold"
        )
        for g in groups:
            t.add_row(
                g["model"], g["state"], *(str(g[k]) for k in ("nodes", "cards", "in_use", "free"))
            )
        _print(groups, as_json, lambda _: t)
        return
    columns = ["node", "state", "cards", "use", "free", "cpu", "mem"]
    if long:
        columns += ["util", "fb", "temp", "W"]
    t = Table(*columns, box=None, pad_edge=False, header_style="bold")
    for r in rows:
        cards = ",".join(f"{c}x{m}" for m, c in r["models"].items()) or "-"
        cells = [r["node"], r["state"], cards, str(r["in_use"]), str(r["free"])]
        cells += [f"{r['cpu_free'] / 1000:g}", f"{r['mem_free_mib'] // 1024}G"]
        if long:
            cells += views.telemetry_cells(r["telemetry"])
        t.add_row(*cells)
    t.caption = "use: cards holding any slice; free: untouched cards; cpu, mem: free"
    _print(rows, as_json, lambda _: t)


@client_command
def queue(
    state: str = typer.Option(None, help="pending or running (default: both)"),
    tenant: str = typer.Option(None, help="Only this tenant"),
    user: str = typer.Option(None, help="Only jobs this user submitted"),
    long: bool = typer.Option(False, "--long", "-l", help="Names and whole reasons"),
    limit: int = typer.Option(1000, help="How many of each"),
    as_json: bool = JSON_OPT,
) -> None:
    """Jobs as squeue shows them: pending (PD) in queue order with the reason they wait and
    how long, then running (R) with where and how long."""
    from gpupool.cli import views

    if state not in (None, "pending", "running"):
        raise SpecError(f"state: {state!r} is not pending or running")
    with ApiClient.from_env() as api:
        pending = (
            []
            if state == "running"
            else api.get("/api/v1/queue", tenant=tenant, limit=limit)["items"]
        )
        running = []
        if state != "pending":
            for s in ("admitted", "running"):
                running += api.get("/api/v1/jobs", state=s, tenant=tenant, limit=limit)["items"]
    rows = views.queue_rows(pending, sorted(running, key=lambda j: j["id"]))
    if user is not None:
        rows = [r for r in rows if r["user"] == user]
    columns = ["id", "tenant", "user", "st", "time", "request", "where / reason"]
    if long:
        columns.insert(3, "name")
    t = Table(*columns, box=None, pad_edge=False, header_style="bold")
    fixed = [[str(r["id"]), r["tenant"], r["user"], r["st"], r["time"], r["request"]] for r in rows]
    # one line a job: the reason is cut to what the terminal leaves (whole with -l)
    widths = [max([len(c), *(len(f[i]) for f in fixed)]) for i, c in enumerate(columns[:6])]
    room = max(12, Console().width - sum(widths) - 2 * len(widths))
    for r, cells in zip(rows, fixed, strict=True):
        cells.append(
            r["where"] if long or len(r["where"]) <= room else r["where"][: room - 1] + "…"
        )
        if long:
            cells.insert(3, r["name"])
        t.add_row(*cells, style="dim" if r["st"] == "PD" else None)
    waiting = sum(r["st"] == "PD" for r in rows)
    t.caption = f"{waiting} pending, {len(rows) - waiting} running (-l: whole reasons)"
    _print(rows, as_json, lambda _: t)


@client_command
def tenants(as_json: bool = JSON_OPT) -> None:
    """Tenants you may see, with quotas and what they use now."""
    with ApiClient.from_env() as api:
        page = api.get("/api/v1/tenants", limit=1000)

    def table(p: dict[str, Any]) -> Table:
        t = Table("tenant", "parent", "flavour", "used", "guaranteed", "borrow limit", "lend limit")
        for ten in p["items"]:
            quotas = ten["quotas"] or [None]
            for q in quotas:
                if q is None:
                    t.add_row(ten["name"], ten["parent"] or "", "-", "", "", "", "")
                    continue
                t.add_row(
                    ten["name"],
                    ten["parent"] or "",
                    q["flavour"],
                    f"{q['used']:g}",
                    f"{q['nominal']:g}",
                    "any" if q["borrowing_limit"] is None else f"{q['borrowing_limit']:g}",
                    "all" if q["lending_limit"] is None else f"{q['lending_limit']:g}",
                )
        return t

    _print(page, as_json, table)


@quota_app.command("set")
@client_command
def quota_set(
    tenant: str = typer.Argument(..., help="Tenant name"),
    flavour: str = typer.Argument("gpu", help="gpu, gpu:MODEL, gpu_mem or cpu"),
    nominal: float = typer.Option(..., help="Guaranteed amount (cards, MiB or cores)"),
    borrowing_limit: float = typer.Option(None, help="How far above the guarantee it may go"),
    lending_limit: float = typer.Option(None, help="How much idle guarantee it lends"),
    as_json: bool = JSON_OPT,
) -> None:
    """Set a tenant's quota, e.g. gpupool quota set algo gpu --nominal 20 --borrowing-limit 10"""
    body = {
        "flavour": flavour,
        "nominal": nominal,
        "borrowing_limit": borrowing_limit,
        "lending_limit": lending_limit,
    }
    with ApiClient.from_env() as api:
        out = api.put(f"/api/v1/tenants/{tenant}/quotas/{flavour}", body)
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    q = next((q for q in out["quotas"] if q["flavour"] == flavour), body)

    def limit(value: float | None, none: str) -> str:
        return none if value is None else f"{value:g}"

    typer.echo(
        f"{tenant} {flavour}: nominal {q['nominal']:g}, borrowing limit "
        f"{limit(q['borrowing_limit'], 'none (any idle capacity)')}, lending limit "
        f"{limit(q['lending_limit'], 'none (lends all its idle guarantee)')}"
    )

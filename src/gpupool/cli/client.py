"""Client commands against a running server: login, jobs, nodes, queue, tenants, quotas.
Rich tables for people, ``--json`` for programs; errors are one line and exit code 2."""

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import typer

from gpupool.cli.errors import print_error
from gpupool.cli.output import FORMAT_HELP, emit, pick_columns, plain, users_zone
from gpupool.client import ApiClient, ClientError, save_credentials
from gpupool.client.paging import all_items
from gpupool.client.profiles import ProfileError
from gpupool.model import SpecError, canonical_model

P = ParamSpec("P")
R = TypeVar("R")
quota_app = typer.Typer(help="Tenant quotas.")
JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of a table")


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except (ClientError, SpecError, ProfileError) as exc:
        print_error(exc)
        raise typer.Exit(code=2) from None


def client_command(fn: Callable[P, R]) -> Callable[P, R]:
    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with _errors():
            return fn(*args, **kwargs)

    return wrapper


def _ago(t: float | None) -> str:
    if t is None:
        return ""
    s = max(0.0, time.time() - t)
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h"


MACHINE_ROLES = {
    "agent": "for gpupool agent on a node",
    "metrics": "for Prometheus scraping /metrics",
    "kubernetes": "for the gpupool kube scheduler's reports",
}


def login(
    server: str = typer.Option("http://127.0.0.1:8080", help="Server URL"),
    token: str = typer.Option(..., prompt=True, hide_input=True, help="API token"),
    profile: str = typer.Option(
        "default", "--profile", help="Save them under this name (several servers)"
    ),
    ca: str = typer.Option(
        None,
        "--ca",
        envvar="GPUPOOL_CA",
        help="The CA file an HTTPS server's certificate is trusted from (a site's own CA); "
        "kept in the profile for later commands [default: the system's]",
    ),
) -> None:
    """Check a token against the server and save both for later commands (mode 0600), with
    the CA it was trusted from, as the current profile (said when another was current)."""
    from gpupool.client import profiles
    from gpupool.client.http import read_ca

    with _errors():
        pem = read_ca(ca, "--ca (GPUPOOL_CA)") if ca else None
        was = profiles.current()
        with ApiClient(server, token, ca=pem) as api:
            status = api.get("/api/v1/status")
            if status["role"] in MACHINE_ROLES:  # it works, but not for a person's commands
                raise ClientError(
                    f"this token is {MACHINE_ROLES[status['role']]} (role {status['role']}), "
                    "not a person's: log in with an admin, tenant-admin, member, viewer or "
                    "finance token"
                )
            saved_ca = pem if api.server.startswith("https://") else None
            path = save_credentials(api.server, token, profile, saved_ca)
    typer.echo(
        f"logged in to {api.server} as {status['user']} (gpupool {status['version']}); "
        f"saved as profile {profile} in {path}"
    )
    if saved_ca:
        typer.echo(f"profile {profile} trusts the CA of {ca} (kept in the profile)")
    if was is not None and was != profile:
        typer.echo(
            f"profile {profile} is now current (it was {was}: gpupool profile use {was} goes "
            f"back, gpupool --profile {was} ... for one command)"
        )


NODE_COLUMNS = ("node", "pool", "state", "cards", "use", "free", "cpu", "mem", "util", "fb",
                "temp", "W", "reason")  # fmt: skip


@client_command
def nodes(
    summary: bool = typer.Option(False, "--summary", "-s", help="Per GPU model and state"),
    long: bool = typer.Option(
        False, "--long", "-l", help="Add telemetry (util, memory, temp, W) and reasons"
    ),
    reasons: bool = typer.Option(
        False, "--list-reasons", "-R", help="Only nodes drained, lost or fenced, with why"
    ),
    fields: str = typer.Option(
        None,
        "--format",
        "-o",
        help=FORMAT_HELP + ", ".join(NODE_COLUMNS) + "; or sinfo's format, with %: \"%P %a %l "
        '%D %t %N" (docs/slurm.md lists the fields)',
    ),
    node_oriented: bool = typer.Option(
        False, "--Node", "-N", help="One line a node (sinfo's formats only)"
    ),
    noheader: bool = typer.Option(
        False, "--noheader", "-h", help="No header line (sinfo's formats only)"
    ),
    exact: bool = typer.Option(
        False, "--exact", "-e", help="Group only nodes alike exactly: what is done anyway"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Nodes as sinfo shows them: state (idle, mixed, allocated, drained, lost, fenced),
    cards by model, in use and free, CPU and memory free. With sinfo's own format (-o
    "%P %a %l %D %t %N") the lines sinfo prints for those fields."""
    from gpupool.cli import views

    if fields is not None and "%" in fields:
        from gpupool.cli.slurm_nodes import sinfo_lines

        for given, flag in ((summary, "--summary"), (long, "--long"), (reasons, "-R"),
                            (as_json, "--json")):  # fmt: skip
            if given:
                raise SpecError(f"{flag}: not with sinfo's formats (-o with %)", field="format")
        del exact  # sinfo -e: nodes are grouped only when alike in every field printed
        with ApiClient.from_env() as api:
            found = all_items(api, "/api/v1/nodes")
        for line in sinfo_lines(found, fields, not noheader, node_oriented):
            typer.echo(line)
        return
    for given, flag in ((node_oriented, "--Node"), (noheader, "--noheader"), (exact, "--exact")):
        if given:
            raise SpecError(f"{flag}: applies to sinfo's formats (-o with %)", field="format")
    default = ["node", "state", "cards", "use", "free", "cpu", "mem"]
    if long:
        default += ["util", "fb", "temp", "W", "reason"]
    if reasons:
        default = ["node", "state", "reason"]
    columns = pick_columns(fields, NODE_COLUMNS, default)
    with ApiClient.from_env() as api:
        rows = views.node_rows(all_items(api, "/api/v1/nodes"))
    if summary:
        groups = views.summary(rows)
        keys = ["model", "state", "nodes", "cards", "in_use", "free"]
        emit(groups, keys, as_json=as_json, headers={"in_use": "in use"})
        return
    if reasons:
        rows = [r for r in rows if r["state"] in ("drained", "lost", "fenced")]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return

    def cell(r: dict[str, Any], column: str) -> str:
        names = ("util", "fb", "temp", "W")
        telemetry = dict(zip(names, views.telemetry_cells(r["telemetry"]), strict=True))
        value = {
            "cards": ",".join(f"{c}x{m}" for m, c in r["models"].items()) or "-",
            "use": r["in_use"],
            "cpu": f"{r['cpu_free'] / 1000:g}",
            "mem": f"{r['mem_free_mib'] // 1024}G",
            **telemetry,
        }.get(column, r.get(column))
        return "-" if value in (None, "") else str(value)

    emit(
        rows,
        columns,
        cell=cell,
        wide=long,  # -l widens the table (telemetry, whole reasons) instead of cutting names
        caption=None if reasons else "use/free: cards with/without a slice; cpu, mem: free",
    )


QUEUE_COLUMNS = ("id", "tenant", "user", "name", "st", "time", "left", "request", "where")


def whoami(api: ApiClient) -> str:
    """The user the token belongs to (for --me)."""
    return str(api.get("/api/v1/status")["user"])


@client_command
def whoami_command(as_json: bool = JSON_OPT) -> None:
    """Who the token you use belongs to: user, role and tenant, and the server."""
    with ApiClient.from_env() as api:
        status = api.get("/api/v1/status")
    me = {k: status[k] for k in ("user", "role", "tenant")} | {"server": api.server}
    if as_json:
        typer.echo(json.dumps(me, indent=2))
    else:
        typer.echo(f"{me['user']} ({me['role']}, tenant {me['tenant'] or '-'}) at {api.server}")


QUEUE_FORMAT_HELP = (
    FORMAT_HELP + ", ".join(QUEUE_COLUMNS) + "; or squeue's format, with %: \"%.18i %.9P %.30j "
    '%.8T %.10M %R" (docs/slurm.md lists the fields)'
)


@client_command
def queue(
    state: str = typer.Option(
        None,
        "--state",
        "-t",
        help="pending or running (default: both); also squeue's PD, R, "
        "CF, PENDING, RUNNING, CONFIGURING, comma-separated",
    ),
    tenant: str = typer.Option(None, "--tenant", "-A", help="Only this tenant (squeue -A)"),
    user: str = typer.Option(None, "--user", "-u", help="Only jobs this user submitted"),
    me: bool = typer.Option(False, "--me", help="Only jobs you submitted"),
    jobs: str = typer.Option(
        None,
        "--jobs",
        "-j",
        help="Only these jobs: 24,25, an array's id (every task), 24_3, 24_[1-3]",
    ),
    long: bool = typer.Option(False, "--long", "-l", help="Names, time left, whole reasons"),
    fields: str = typer.Option(None, "--format", "-o", help=QUEUE_FORMAT_HELP),
    slurm_names: str = typer.Option(
        None, "--Format", "-O", help='squeue\'s -O: "JobID:.19 ,Name:20,State"'
    ),
    noheader: bool = typer.Option(
        False, "--noheader", "-h", help="No header line (squeue's formats only)"
    ),
    start: bool = typer.Option(
        False,
        "--start",
        help="Pending jobs' expected start time and nodes (squeue --start: START_TIME, SCHEDNODES)",
    ),
    limit: int = typer.Option(1000, help="How many of each"),
    as_json: bool = JSON_OPT,
) -> None:
    """Jobs as squeue shows them: pending (PD) in queue order with the reason they wait and
    how long, then running (R) with where, how long and the time left of their limit. With
    squeue's own format (-o "%.18i %.9P %j", -O) the lines squeue prints for those fields;
    --start: when and where the leader's last plan expects each pending job to start."""
    from gpupool.cli import slurm_cli, views
    from gpupool.cli.slurm_jobs import SQUEUE_START

    if start:
        if state is not None:
            raise SpecError("--start: shows pending jobs only; not with --state", field="state")
        state = "pending"
        if fields is None and slurm_names is None:
            fields = SQUEUE_START

    states = slurm_cli.live_states(state, "--state", "pending or running") or (
        "pending",
        "admitted",
        "running",
    )
    refs = slurm_cli.job_refs(jobs)
    slurm = slurm_names is not None or (fields is not None and "%" in fields)
    if slurm_names is not None and fields is not None:
        raise SpecError("give -o/--format or -O/--Format, not both", field="Format")
    if noheader and not slurm:
        raise SpecError("--noheader: applies to squeue's formats (-o with %, -O)", field="noheader")
    if slurm and (as_json or long):
        given = "--json" if as_json else "--long"
        with_what = "--start" if start else "squeue's formats (-o with %, -O)"
        raise SpecError(f"{given}: not with {with_what}", field="Format")
    default = ["id", "tenant", "user", "st", "time", "request", "where"]
    if long:
        default[3:3] = ["name"]
        default[-2:-2] = ["left"]
    columns = [] if slurm else pick_columns(fields, QUEUE_COLUMNS, default)
    with ApiClient.from_env() as api:
        user = whoami(api) if me else user
        named = None if refs is None else {j["id"] for j in slurm_cli.named_jobs(api, refs)}
        pending, full = [], []
        if "pending" in states:
            pending = api.get("/api/v1/queue", tenant=tenant, user=user, limit=limit)["items"]
            if slurm:  # the API's whole jobs, in queue order
                order = {q["id"]: i for i, q in enumerate(pending)}
                page = api.get("/api/v1/jobs", state="pending", tenant=tenant, user=user,
                               limit=limit)  # fmt: skip
                full = sorted(page["items"], key=lambda j: (order.get(j["id"], 1e18), j["id"]))
        running = []
        for s in (s for s in ("admitted", "running") if s in states):
            page = api.get("/api/v1/jobs", state=s, tenant=tenant, user=user, limit=limit)
            running += page["items"]
        deps = slurm_cli.dependency_states(api, full) if slurm else {}
    running = sorted(running, key=lambda j: j["id"])
    if named is not None:
        pending = [q for q in pending if q["id"] in named]
        full = [j for j in full if j["id"] in named]
        running = [j for j in running if j["id"] in named]
    if slurm:
        lines = slurm_cli.squeue_lines(full + running, fields, slurm_names, not noheader, deps)
        for line in lines:
            typer.echo(line)  # each value's control characters made visible
        return
    rows = views.queue_rows(pending, running)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    waiting = sum(r["st"] == "PD" for r in rows)
    emit(
        rows,
        columns,
        dim=lambda r: r["st"] == "PD",
        headers={"where": "where / reason"},
        cell=lambda r, c: users_zone(plain(r.get(c))) if c == "where" else plain(r.get(c)),
        wide=long,
        cut="where",  # one line a job: the reason cut to what the terminal leaves (-l: whole)
        caption=f"{waiting} pending, {len(rows) - waiting} running (-l: whole reasons)",
    )


@client_command
def tenants(as_json: bool = JSON_OPT) -> None:
    """Tenants you may see, with quotas and what they use now: guaranteed (nominal), how far
    above it they may borrow (any: whatever others leave idle), how much they lend; a
    warning for every level where guarantees exceed a parent's guarantee or the pool."""
    with ApiClient.from_env() as api:
        page = api.get("/api/v1/tenants", limit=1000)
        try:
            overbooked = api.get("/api/v1/overbooking")["items"]
        except ClientError as exc:
            if exc.status != 404:  # a server older than the check: nothing to say
                raise
            overbooked = []
    for level in overbooked:  # guarantees above what is above them, at any level
        typer.echo(f"warning: {level['message']}", err=True)
    if as_json:
        typer.echo(json.dumps(page, indent=2))
        return
    rows = []
    for ten in page["items"]:
        for q in ten["quotas"] or [None]:
            row = {"tenant": ten["name"], "parent": ten["parent"] or "-", "resource": "-"}
            if q is not None:
                borrow, lend = q["borrowing_limit"], q["lending_limit"]
                row |= {
                    "resource": q["resource"],
                    "used": f"{q['used']:g}",
                    "guaranteed": f"{q['nominal']:g}",
                    "borrow": "any" if borrow is None else f"{borrow:g}",
                    "lend": "all" if lend is None else f"{lend:g}",
                }
            rows.append(row)
    columns = ["tenant", "parent", "resource", "used", "guaranteed", "borrow", "lend"]
    emit(rows, columns, caption="gpu: cards; borrow, lend: limits above / of the guarantee")


def _limit(option: str, value: str) -> float | None:
    """A limit as typed: a number, or none/any for no limit."""
    if value.strip().lower() in ("none", "any", "unlimited"):
        return None
    try:
        number = float(value)
    except ValueError:
        flag = "--" + option.replace("_", "-")
        raise SpecError(f"{flag}: {value!r} is not a number or 'none'", field=option) from None
    return number


@quota_app.command("set")
@client_command
def quota_set(
    tenant: str = typer.Argument(..., help="Tenant name"),
    resource: str = typer.Argument("gpu", help="gpu, gpu:MODEL, gpu_mem or cpu"),
    nominal: float = typer.Option(
        None, help="Guaranteed amount (cards, MiB or cores); needed for a new quota"
    ),
    borrowing_limit: str = typer.Option(
        None, help="How far above the guarantee it may go; 'none': any idle capacity"
    ),
    lending_limit: str = typer.Option(
        None, help="How much idle guarantee it lends; 'none': all of it"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Set a tenant's quota, e.g. gpupool quota set algo gpu --nominal 20 --borrowing-limit 10.
    Changes only what is given: the rest of an existing quota stays as it is."""
    given = {"borrowing_limit": borrowing_limit, "lending_limit": lending_limit}
    wanted = f"gpu:{canonical_model(resource[4:])}" if resource.startswith("gpu:") else resource
    with ApiClient.from_env() as api:
        quotas = api.get(f"/api/v1/tenants/{tenant}")["quotas"]
        current: dict[str, Any] = next((q for q in quotas if q["resource"] == wanted), {})
        if nominal is None and not current:
            raise SpecError(f"{tenant} has no {resource} quota yet: give --nominal")
        body = {
            "resource": resource,
            "nominal": current["nominal"] if nominal is None else nominal,
            **{k: current.get(k) if v is None else _limit(k, v) for k, v in given.items()},
        }
        out = api.put(f"/api/v1/tenants/{tenant}/quotas/{resource}", body)
    for warning in out.get("warnings") or []:
        typer.echo(f"warning: {warning}", err=True)
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    q = next((q for q in out["quotas"] if q["resource"] == wanted), body)

    def limit(value: Any, none: str) -> str:
        return none if value is None else f"{value:g}"

    typer.echo(
        f"{tenant} {resource}: nominal {q['nominal']:g}, borrowing limit "
        f"{limit(q['borrowing_limit'], 'none (any idle capacity)')}, lending limit "
        f"{limit(q['lending_limit'], 'none (lends all its idle guarantee)')}"
    )

"""Administration against a running server, as an operator does it every day: tenants, users,
tokens, quotas, draining nodes (reservations: ``cli/reservations.py``). Every command has
``--json``; errors are one line and exit code 2 (``client_command``)."""

import json
import time
from typing import Any

import typer

from gpupool.cli.client import JSON_OPT, client_command, quota_app
from gpupool.cli.output import SafeTable, emit, local, pick_columns, show, zone_now, zoned
from gpupool.client import ApiClient
from gpupool.model import SpecError
from gpupool.model.units import parse_point_in_time

tenant_app = typer.Typer(help="Tenants (teams, projects) and their tree.")
user_app = typer.Typer(help="Users: create (with a first token), list, disable, enable.")
token_app = typer.Typer(help="API tokens of a user: create (optionally expiring), list, revoke.")
node_app = typer.Typer(
    help="Nodes: drain (no new work), resume, remove; bootstrap tokens to join; topology labels."
)
FORMAT_OPT = typer.Option(None, "--format", "-o", help="Comma list of the columns to show")
WHEN_HELP = (
    "now, a duration from now (12h, 7d), or an ISO date/time (in your zone, TZ, unless it "
    "names one)"
)


def _delete(path: str, said: str) -> None:
    with ApiClient.from_env() as api:
        api.delete(path)
    typer.echo(said)


def _when(text: str | None, what: str) -> float | None:
    return None if text is None else parse_point_in_time(text, time.time(), what)


# -- tenants --------------------------------------------------------------------------------
@tenant_app.command("create")
@client_command
def tenant_create(
    name: str = typer.Argument(..., help="Tenant name"),
    parent: str = typer.Option(None, help="Parent tenant (an organisation)"),
    weight: float = typer.Option(1.0, help="Fair-share weight"),
    as_json: bool = JSON_OPT,
) -> None:
    """Create a tenant, e.g. gpupool tenant create vision --parent research"""
    body = {"name": name, "parent": parent, "weight": weight}
    with ApiClient.from_env() as api:
        out = api.post("/api/v1/tenants", {k: v for k, v in body.items() if v is not None})
    under = f" under {out['parent']}" if out.get("parent") else ""
    show(out, as_json, f"tenant {out['name']} created{under}")


@tenant_app.command("show")
@client_command
def tenantshow(name: str = typer.Argument(...), as_json: bool = JSON_OPT) -> None:
    """A tenant with its quotas and what it uses now."""
    with ApiClient.from_env() as api:
        out = api.get(f"/api/v1/tenants/{name}")
    table = SafeTable("resource", "nominal", "borrowing", "lending", "used", title=f"tenant {name}")
    for q in out["quotas"]:
        limit = lambda v: "-" if v is None else f"{v:g}"  # noqa: E731
        table.add_row(
            q["resource"],
            f"{q['nominal']:g}",
            limit(q["borrowing_limit"]),
            limit(q["lending_limit"]),
            limit(q.get("used")),
        )
    table.caption = f"parent {out['parent'] or '-'}, weight {out['weight']:g}"
    show(out, as_json, table)


@tenant_app.command("limits")
@client_command
def tenant_limits(
    name: str = typer.Argument(..., help="Tenant name"),
    jobs: int = typer.Option(None, min=1, help="Jobs pending, held or running at once"),
    array: int = typer.Option(None, min=1, help="Tasks in one array"),
    services: int = typer.Option(None, min=0, help="Services"),
    replicas: int = typer.Option(None, min=0, help="Replicas its services may run together"),
    log_mib: int = typer.Option(None, min=1, help="MiB of job logs the server keeps"),
    reset: bool = typer.Option(False, help="Back to the server's defaults (then the options)"),
    as_json: bool = JSON_OPT,
) -> None:
    """A tenant's admission limits and what it holds; with options, set them (admins), e.g.
    gpupool tenant limits vision --jobs 2000 --services 5"""
    given = {"jobs": jobs, "array": array, "services": services, "replicas": replicas,
             "log_mib": log_mib}  # fmt: skip
    with ApiClient.from_env() as api:
        out = api.get(f"/api/v1/tenants/{name}/limits")
        if reset or any(v is not None for v in given.values()):
            body = {} if reset else dict(out["own"])
            body |= {k: v for k, v in given.items() if v is not None}
            out = api.put(f"/api/v1/tenants/{name}/limits", body)
    table = SafeTable("limit", "in force", "held", "set for it", title=f"limits of {name}")
    for key, value in out["limits"].items():
        held = out["held"].get(key)
        table.add_row(key, str(value), "-" if held is None else str(held),
                      "yes" if key in out["own"] else "default")  # fmt: skip
    show(out, as_json, table)


@tenant_app.command("idle-policy")
@client_command
def tenant_idle_policy(
    name: str = typer.Argument(..., help="Tenant name"),
    klass: str = typer.Option("*", "--class", help="The priority class it is for (*: any)"),
    timeout: str = typer.Option(None, help="Idle time before a session is released: 2h, 30m"),
    warning: str = typer.Option(None, help="Warn its terminals this long before [10m]"),
    off: bool = typer.Option(False, "--off", help="Never release that class's idle sessions"),
    clear: bool = typer.Option(False, "--clear", help="Drop the rule: the parent's applies"),
    as_json: bool = JSON_OPT,
) -> None:
    """Idle timeouts of a tenant's interactive sessions, per priority class, with where each
    rule in force was set; with options, set one (admins; tenant-admins below their own
    tenant), e.g. gpupool tenant idle-policy vision --class dev-test --timeout 1h"""
    from gpupool.model.batch import parse_time

    if sum((timeout is not None, off, clear)) > 1:
        raise SpecError("give one of --timeout, --off, --clear", field="timeout")
    if warning is not None and timeout is None:
        raise SpecError("--warning goes with --timeout", field="warning")
    with ApiClient.from_env() as api:
        out = api.get(f"/api/v1/tenants/{name}/idle-policy")
        if timeout is not None or off or clear:
            rules = dict(out["own"])
            rules.pop(klass, None)
            if off:
                rules[klass] = {"timeout_s": 0, "warning_s": 0}
            elif timeout is not None:
                warn = parse_time(warning) if warning is not None else 600
                rules[klass] = {"timeout_s": parse_time(timeout), "warning_s": warn}
            out = api.put(f"/api/v1/tenants/{name}/idle-policy", {"rules": rules})
    table = SafeTable("class", "timeout", "warning", "set by", title=f"idle policy of {name}")
    for r in out["in_force"]:
        where = r["set_by"] or "server default"
        if r["set_for"] == "*" and r["set_by"]:
            where += " (any class)"
        timeout_s, warning_s = r["timeout_s"], r["warning_s"]
        table.add_row(r["priority_class"], f"{timeout_s} s" if timeout_s else "off",
                      f"{warning_s} s" if timeout_s else "-", where)  # fmt: skip
    show(out, as_json, table)


@tenant_app.command("delete")
@client_command
def tenant_delete(name: str = typer.Argument(...)) -> None:
    """Delete a tenant (refused while it has sub-tenants, users or jobs)."""
    _delete(f"/api/v1/tenants/{name}", f"tenant {name} deleted")


@quota_app.command("delete")
@client_command
def quota_delete(
    tenant: str = typer.Argument(..., help="Tenant name"),
    resource: str = typer.Argument("gpu", help="gpu, gpu:MODEL, gpu_mem or cpu"),
) -> None:
    """Remove one quota of a tenant (it then has no guarantee of that resource: its children's
    guarantees count against the level above it, which it warns about if they exceed it)."""
    with ApiClient.from_env() as api:
        out = api.delete(f"/api/v1/tenants/{tenant}/quotas/{resource}")
    for warning in (out or {}).get("warnings") or []:
        typer.echo(f"warning: {warning}", err=True)
    typer.echo(f"{tenant} {resource}: quota removed")


# -- users and tokens -------------------------------------------------------------------------
@user_app.command("create")
@client_command
def user_create(
    name: str = typer.Argument(..., help="User name"),
    role: str = typer.Option(
        ..., help="admin, tenant-admin, member, viewer, finance, agent or metrics"
    ),
    tenant: str = typer.Option(None, help="Tenant of a tenant-admin, member or viewer"),
    node: str = typer.Option(None, help="Node scope of an agent ('*': every node)"),
    expires: str = typer.Option(None, help=f"When the first token stops: {WHEN_HELP}"),
    as_json: bool = JSON_OPT,
) -> None:
    """Create a user and print its first token (shown only now) as the last word."""
    body = {
        "name": name,
        "role": role,
        "tenant": tenant,
        "node": node,
        "expires_at": _when(expires, "expires"),
    }
    with ApiClient.from_env() as api:
        out = api.post("/api/v1/users", {k: v for k, v in body.items() if v is not None})
    until = f", expires {zoned(out.get('expires_at'))}" if out.get("expires_at") else ""
    show(out, as_json, f"user {name} ({role}{until}) token: {out['token']}")


@user_app.command("list")
@client_command
def user_list(fields: str = FORMAT_OPT, as_json: bool = JSON_OPT) -> None:
    """Users you may see (admins: all; tenant-admins: their subtree)."""
    with ApiClient.from_env() as api:
        users = api.get("/api/v1/users")
    rows = [
        {
            "user": u["name"],
            "role": u["role"],
            "tenant": u["tenant"],
            "node": u["node"],
            "state": "disabled" if u["disabled"] else "active",
        }
        for u in users
    ]
    _listing(users, rows, fields, as_json, "users")


def _listing(
    data: object, rows: list[dict[str, Any]], fields: str | None, as_json: bool, title: str
) -> None:
    """A small list: JSON as the API said it, or the rows with the columns ``-o`` chose."""
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    known = list(rows[0]) if rows else []
    emit(rows, pick_columns(fields, known, known) if rows else [], title=title)


def _set_disabled(name: str, disabled: bool, as_json: bool) -> None:
    with ApiClient.from_env() as api:
        out = api.patch(f"/api/v1/users/{name}", {"disabled": disabled})
    show(out, as_json, f"user {name} {'disabled' if disabled else 'enabled'}")


@user_app.command("disable")
@client_command
def user_disable(name: str = typer.Argument(...), as_json: bool = JSON_OPT) -> None:
    """Stop every token of a user at once (its running jobs go on)."""
    _set_disabled(name, True, as_json)


@user_app.command("enable")
@client_command
def user_enable(name: str = typer.Argument(...), as_json: bool = JSON_OPT) -> None:
    """Let a disabled user's tokens work again."""
    _set_disabled(name, False, as_json)


@token_app.command("create")
@client_command
def token_create(
    user: str = typer.Option(..., help="Whose token (your own name for yourself)"),
    expires: str = typer.Option(None, help=f"When it stops working: {WHEN_HELP}"),
    as_json: bool = JSON_OPT,
) -> None:
    """A new token for a user, printed as the last word (shown only now). One you make for
    yourself never outlives the token you use."""
    body = {"expires_at": _when(expires, "expires")}
    with ApiClient.from_env() as api:
        out = api.post(f"/api/v1/users/{user}/tokens", body)
    until = f" (expires {zoned(out['expires_at'])})" if out.get("expires_at") else ""
    show(out, as_json, f"token for {user}{until}: {out['token']}")


@token_app.command("list")
@client_command
def token_list(fields: str = FORMAT_OPT, as_json: bool = JSON_OPT) -> None:
    """Token prefixes (never the secrets): all for admins, your own otherwise."""
    with ApiClient.from_env() as api:
        tokens = api.get("/api/v1/tokens")
    now = time.time()
    rows = []
    for t in tokens:
        expired = t["expires_at"] is not None and t["expires_at"] <= now
        rows.append(
            {
                "id": t["id"],
                "user": t["user"],
                "prefix": t["prefix"],
                "created": local(t["created_at"]),
                "expires": local(t["expires_at"]),
                "state": "revoked" if t["revoked"] else "expired" if expired else "active",
            }
        )
    _listing(tokens, rows, fields, as_json, f"tokens ({zone_now()})")


@token_app.command("revoke")
@client_command
def token_revoke(
    token_id: int = typer.Argument(..., help="The id from gpupool token list"),
) -> None:
    """Revoke a token for good."""
    _delete(f"/api/v1/tokens/{token_id}", f"token {token_id} revoked")


# -- nodes ------------------------------------------------------------------------------------
def _schedulable(name: str, value: bool, as_json: bool, said: str) -> None:
    with ApiClient.from_env() as api:
        out = api.patch(f"/api/v1/nodes/{name}", {"schedulable": value})
    show(out, as_json, said)


@node_app.command("drain")
@client_command
def node_drain(
    name: str = typer.Argument(...),
    reason: str = typer.Option("", help="Why (gpupool nodes shows it)"),
    now: bool = typer.Option(False, "--now", help="Requeue its running jobs at once"),
    as_json: bool = JSON_OPT,
) -> None:
    """Take no new work on a node; the jobs running there finish, or with --now are
    requeued at once (admins)."""
    with ApiClient.from_env() as api:
        out = api.post(f"/api/v1/nodes/{name}/drain", {"reason": reason, "now": now})
    said = "running jobs requeued" if now else "running jobs finish, none start"
    show(out, as_json, f"node {name} drained ({out['drain_reason']}): {said}")


@node_app.command("topology")
@client_command
def node_topology(
    file: str = typer.Argument(..., help="YAML: nodes: {NAME: {leaf: L, block: B, ...}}"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the labels, change nothing."),
    as_json: bool = JSON_OPT,
) -> None:
    """Set nodes' network topology labels from a file (their other labels are kept; the
    topology labels a node had are replaced). docs/topology.md."""
    from pathlib import Path

    import yaml

    from gpupool.scheduler.topology import LABELS, labels_from_file

    try:
        doc = yaml.safe_load(Path(file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SpecError(f"topology file {file}: {exc}") from None
    wanted = labels_from_file(doc)
    done: dict[str, dict[str, str]] = {}
    with ApiClient.from_env() as api:
        for name, topo in wanted.items():
            node = api.get(f"/api/v1/nodes/{name}")
            kept = {k: v for k, v in node["labels"].items() if k not in LABELS.values()}
            done[name] = {**kept, **topo}
            if not dry_run:
                api.patch(f"/api/v1/nodes/{name}", {"labels": done[name]})
    said = "would set" if dry_run else "set"
    show(done, as_json, f"{said} the topology of {len(done)} node(s)")


@node_app.command("resume")
@client_command
def node_resume(name: str = typer.Argument(...), as_json: bool = JSON_OPT) -> None:
    """Let a drained node take work again (admins)."""
    _schedulable(name, True, as_json, f"node {name} takes work again")

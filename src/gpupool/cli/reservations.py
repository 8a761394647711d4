"""Reservations from the command line (admins): create — with a preview of what it will
stop and move when it begins (``--dry-run``), refused when it would leave a service without
a place unless ``--allow-outage`` —, list with what each one ahead will do, delete."""

from typing import Any

import typer

from gpupool.cli.admin_client import FORMAT_OPT, WHEN_HELP, _delete, _listing, _when
from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.output import local, show, zone_now, zoned
from gpupool.client import ApiClient
from gpupool.model import SpecError

reservation_app = typer.Typer(help="Reserve nodes for a tenant over a time window (admins).")


def _job(j: dict[str, Any]) -> str:
    return f"job {j['job_id']}" + (f" (service {j['service']})" if j.get("service") else "")


def plan_lines(out: dict[str, Any]) -> list[str]:
    """What a reservation does when it begins, in lines: the online work it moves and where,
    the online work it leaves without a place, and (last) the jobs it stops."""
    plan = out.get("plan")
    will = "would" if out.get("dry_run") else "will"
    lines = []
    if plan is not None and plan["moves"]:
        moved = "; ".join(f"{_job(m)} to {', '.join(m['to'])}" for m in plan["moves"][:10])
        lines.append(
            f"when it begins it moves {moved} (a copy starts there first; each stops once its "
            "copy runs)"
        )
    for s in (plan or {}).get("stranded") or []:
        when = "it begins" if s["own"] else f"reservation {s['by']} begins"
        lines.append(
            f"it leaves {_job(s)} of {s['tenant']} without a place: stopped at "
            f"{zoned(s['at'])} when {when} ({s['why']})"
        )
    if plan is not None and plan["hidden"]:
        lines.append(f"and {plan['hidden']} job(s) of teams you do not see")
    # what it will stop: said now, not when it does (a hold of cards: what it may stop)
    stops = [str(j["job_id"]) for j in plan["stops"]] if plan is not None else []
    if out.get("cards") or plan is None:
        stops = [str(j) for j in out.get("displaces") or []]
    if stops:
        more = f" and {len(stops) - 10} more" if len(stops) > 10 else ""
        may = "may" if out.get("cards") else will
        lines.append(
            f"it {may} stop job(s) {', '.join(stops[:10])}{more} when it begins (others' "
            "work on its nodes)"
        )
    return lines


@reservation_app.command("create")
@client_command
def reservation_create(
    tenant: str = typer.Option(..., help="The tenant the nodes are held for"),
    nodes: str = typer.Option(None, help="Comma list of node names (held whole, without --cards)"),
    cards: str = typer.Option(
        None,
        help="Hold N cards, not whole nodes: MODEL:N (on the fewest nodes of that model), or "
        "N with --nodes (on those)",
    ),
    start: str = typer.Option("now", help=f"From: {WHEN_HELP}"),
    end: str = typer.Option(..., help=f"Until: {WHEN_HELP}"),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Say what it would stop and move when it begins; create nothing"
    ),
    allow_outage: bool = typer.Option(
        False,
        "--allow-outage",
        help="Create it even though it leaves a service without a place (its replicas stop)",
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Hold nodes for a tenant, e.g. --tenant algo --nodes n1,n2 --start 2026-12-10T08:00
    --end 2026-12-12T08:00, or N cards of a model: --cards A100-80G:6. Others' work may use
    what is not held. When it begins, the replicas of services on its nodes move (a copy
    elsewhere first), others' other work stops; it says which. Refused if it overlaps
    another tenant's reservation, or if it would leave a service without a place (at its
    start, or when another reservation begins during it) unless --allow-outage."""
    names = [n.strip() for n in (nodes or "").split(",") if n.strip()]
    body: dict[str, object] = {"tenant": tenant, "start": _when(start, "start"),
                               "end": _when(end, "end")}  # fmt: skip
    if names:
        body["nodes"] = names
    if cards is not None:
        model, _, count = cards.rpartition(":")
        if not count.isdigit() or int(count) < 1 or (not model and not names):
            raise SpecError(f"cards: {cards!r} is not MODEL:N (or N with --nodes)", field="cards")
        body["cards"] = int(count)
        if model:
            body["model"] = model
    elif not names:
        raise SpecError("nodes: give node names, or --cards MODEL:N")
    if dry_run:
        body["dry_run"] = True
    if allow_outage:
        body["allow_outage"] = True
    with ApiClient.from_env() as api:
        out = api.post("/api/v1/reservations", body)
    held = f"{out['cards']} cards on " if out.get("cards") else ""
    what = (
        "dry run, nothing created: a reservation of"
        if out.get("dry_run")
        else (f"reservation {out['id']}:")
    )
    said = (
        f"{what} {held}{', '.join(out['nodes'])} for {out['tenant']} "
        f"from {zoned(out['start'])} to {zoned(out['end'])}"
    )
    show(out, as_json, said)
    if not as_json:
        for line in plan_lines(out):
            typer.echo(line)


def _plan_cell(r: dict[str, Any]) -> str:
    plan = r.get("plan")
    if plan is None:
        return "on" if r.get("status", "").startswith("on ") else "-"
    parts = []
    if plan["stops"]:
        parts.append(f"stops {len(plan['stops'])}")
    if plan["moves"]:
        parts.append(f"moves {len(plan['moves'])}")
    left = sorted({s.get("service") or f"job {s['job_id']}" for s in plan["stranded"]})
    if left:
        parts.append(f"strands {', '.join(left)}")
    return ", ".join(parts) or "stops none"


@reservation_app.command("list")
@client_command
def reservation_list(fields: str = FORMAT_OPT, as_json: bool = JSON_OPT) -> None:
    """Current and future reservations (every tenant's: they block everyone else); plan: what
    each one ahead does when it begins as things are now (stops N jobs, moves N replicas — a
    copy elsewhere first —, strands the services it leaves without a place), "on" for one
    begun. --json has the jobs, and in status what it keeps off its nodes until then."""
    with ApiClient.from_env() as api:
        reservations = api.get("/api/v1/reservations")
    rows = [
        {
            "id": r["id"],
            "tenant": r["tenant"],
            "from": local(r["start"]),
            "until": local(r["end"]),
            "nodes": (f"{r['cards']} cards of " if r.get("cards") else "")
            + ", ".join(r["nodes"][:4])
            + (f" +{len(r['nodes']) - 4}" if len(r["nodes"]) > 4 else ""),
            "plan": _plan_cell(r),
        }
        for r in reservations
    ]
    _listing(reservations, rows, fields, as_json, f"reservations ({zone_now()})")


@reservation_app.command("delete")
@client_command
def reservation_delete(res_id: int = typer.Argument(...)) -> None:
    """Cancel a reservation (admins, or a tenant-admin of its tenant)."""
    _delete(f"/api/v1/reservations/{res_id}", f"reservation {res_id} cancelled")

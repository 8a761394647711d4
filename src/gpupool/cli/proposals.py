"""``gpupool advisory`` and ``gpupool proposal``: which actions the scheduler only proposes,
and deciding its proposals (admins)."""

import typer

from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.output import emit, local, pick_columns, show, users_zone
from gpupool.client import ApiClient
from gpupool.model import SpecError
from gpupool.scheduler.advice import ACTIONS

advisory_app = typer.Typer(
    help="Advisory mode: the scheduler proposes an action instead of taking it (per action)."
)
proposal_app = typer.Typer(help="The scheduler's proposals (advisory mode): list, approve, reject.")
COLUMNS = ["id", "subject", "tenant", "action", "state", "gain", "expires", "decided_by"]


def _said(out: dict) -> str:
    propose = ", ".join(out["advisory"]) or "none"
    act = ", ".join(out["acting"]) or "none"
    return f"proposed, not taken: {propose}\ntaken: {act}"


@advisory_app.command("show")
@client_command
def advisory_show(as_json: bool = JSON_OPT) -> None:
    """Which actions are proposed and which taken."""
    with ApiClient.from_env() as api:
        out = api.get("/api/v1/advisory")
    show(out, as_json, _said(out))


@advisory_app.command("set")
@client_command
def advisory_set(
    items: list[str] = typer.Argument(
        ..., help="ACTION=on|off items (on: propose, off: act), e.g. bind=on preempt=on"
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Switch actions between proposing (on) and acting (off): start fully advisory, move to
    automatic action by action."""
    wanted: dict[str, bool] = {}
    for item in items:
        action, sep, value = item.partition("=")
        action = action.strip().lower()
        if not sep or action not in ACTIONS or value.strip().lower() not in ("on", "off"):
            raise SpecError(
                f"advisory: {item!r} is not ACTION=on|off with ACTION one of {', '.join(ACTIONS)}"
            )
        wanted[action] = value.strip().lower() == "on"
    with ApiClient.from_env() as api:
        out = api.put("/api/v1/advisory", {"actions": wanted})
    show(out, as_json, _said(out))


@proposal_app.command("list")
@client_command
def proposal_list(
    state: str = typer.Option("pending", help="pending, approved, rejected, expired, done, or all"),
    fields: str = typer.Option(None, "--format", "-o", help="Comma list of columns"),
    as_json: bool = JSON_OPT,
) -> None:
    """Proposals, newest first, with their reason and expected gain (-o reason,gain)."""
    with ApiClient.from_env() as api:
        page = api.get("/api/v1/proposals", **({} if state == "all" else {"state": state}))
    if as_json:
        show(page, True, "")
        return
    rows = [
        {
            "id": p["id"],
            "subject": p["subject"],
            "tenant": p["tenant"],
            "action": p["action"],
            "state": p["state"],
            "reason": users_zone(p["reason"] or ""),
            "gain": p["gain"],
            "expires": local(p["expires_at"]),
            "decided_by": p["decided_by"],
        }
        for p in page["items"]
    ]
    known = [*COLUMNS, "reason"]
    emit(rows, pick_columns(fields, known, COLUMNS), title=f"proposals ({state})")


def _decide(proposal: int, verb: str, as_json: bool) -> None:
    with ApiClient.from_env() as api:
        out = api.post(f"/api/v1/proposals/{proposal}/{verb}")
    show(out, as_json, f"proposal {proposal} {out['state']}: {out['action']} {out['subject']}")


@proposal_app.command("approve")
@client_command
def proposal_approve(proposal: int = typer.Argument(..., min=1), as_json: bool = JSON_OPT) -> None:
    """Let the job's next decision of this action go ahead."""
    _decide(proposal, "approve", as_json)


@proposal_app.command("reject")
@client_command
def proposal_reject(proposal: int = typer.Argument(..., min=1), as_json: bool = JSON_OPT) -> None:
    """Hold the job back from this action until the proposal's time is up."""
    _decide(proposal, "reject", as_json)

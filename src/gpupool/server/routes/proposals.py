"""Advisory mode: which actions the scheduler only proposes, and the proposals waiting for an
admin (gpupool.server.advisory)."""

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from sqlalchemy import select

from gpupool.scheduler.advice import ACTIONS
from gpupool.server.advisory import advisory_actions, decide, set_advisory
from gpupool.server.auth import Role
from gpupool.server.db.tables import ProposalRow
from gpupool.server.deps import Caller, Ctx, Id, Limit, Offset, require
from gpupool.server.errors import ApiError, not_found
from gpupool.server.routes.views import page
from gpupool.server.schemas import Page

router = APIRouter(prefix="/api/v1", tags=["advisory"])
ADMIN = (Role.ADMIN,)
Action = Literal["bind", "preempt", "reclaim", "defragment", "mode-switch", "scale-in"]
State = Literal["pending", "approved", "rejected", "expired", "done"]


class AdvisoryIn(BaseModel):
    """Per action: True to propose instead of act, False to act. Actions not named keep
    their setting."""

    actions: dict[Action, bool] = Field(max_length=len(ACTIONS))


class AdvisoryOut(BaseModel):
    advisory: list[str]  # actions proposed, not taken
    acting: list[str]


class ProposalOut(BaseModel):
    id: int
    job_id: int | None
    subject: str
    tenant: str
    action: str
    state: str
    reason: str
    gain: str
    detail: dict[str, Any]
    created_at: float
    expires_at: float
    decided_by: str
    decided_at: float | None
    done_at: float | None


def _out(advisory: set[str]) -> AdvisoryOut:
    return AdvisoryOut(
        advisory=[a for a in ACTIONS if a in advisory],
        acting=[a for a in ACTIONS if a not in advisory],
    )


@router.get("/advisory", response_model=AdvisoryOut)
def get_advisory(ctx: Ctx, who: Caller) -> AdvisoryOut:
    require(who, ADMIN, "reading advisory mode")
    with ctx.db.read() as s:
        return _out(advisory_actions(s))


@router.put("/advisory", response_model=AdvisoryOut)
def put_advisory(body: AdvisoryIn, ctx: Ctx, who: Caller) -> AdvisoryOut:
    """Switch actions between proposing and acting; a pool can start fully advisory and move
    to automatic action by action."""
    require(who, ADMIN, "setting advisory mode")
    with ctx.db.write() as s:
        now = set_advisory(s, {str(k): on for k, on in body.actions.items()}, who.user, time.time())
    ctx.loop.wake()
    return _out(now)


@router.get("/proposals", response_model=Page[ProposalOut])
def list_proposals(
    ctx: Ctx,
    who: Caller,
    limit: Limit = 100,
    offset: Offset = 0,
    state: Annotated[State | None, Query()] = None,
) -> Page[ProposalOut]:
    require(who, ADMIN, "reading proposals")
    q = select(ProposalRow).order_by(ProposalRow.id.desc())
    if state is not None:
        q = q.where(ProposalRow.state == state)
    with ctx.db.read() as s:
        rows, total = page(s, q, limit, offset)
        items = [ProposalOut.model_validate(r, from_attributes=True) for r in rows]
    return Page(items=items, total=total, limit=limit, offset=offset)


def _decide(ctx: Ctx, who: Caller, proposal_id: int, approve: bool) -> ProposalOut:
    require(who, ADMIN, "deciding proposals")
    now = time.time()
    with ctx.db.write() as s:
        row = s.get(ProposalRow, proposal_id, with_for_update=True)
        if row is None:
            raise not_found(f"proposal {proposal_id}")
        if row.state != "pending" or row.expires_at <= now:
            state = "expired" if row.state == "pending" else row.state
            raise ApiError(409, f"proposal {proposal_id} is {state}, not pending", "state")
        decide(s, row, approve, who.user, now, ctx.settings.proposal_ttl_s)
        out = ProposalOut.model_validate(row, from_attributes=True)
    ctx.loop.wake()
    return out


@router.post("/proposals/{proposal_id}/approve", response_model=ProposalOut)
def approve(proposal_id: Id, ctx: Ctx, who: Caller) -> ProposalOut:
    """Let the job's next decision of this action go ahead (the same victims or fewer)."""
    return _decide(ctx, who, proposal_id, True)


@router.post("/proposals/{proposal_id}/reject", response_model=ProposalOut)
def reject(proposal_id: Id, ctx: Ctx, who: Caller) -> ProposalOut:
    """The job is not proposed again for this action until the proposal's time is up."""
    return _decide(ctx, who, proposal_id, False)

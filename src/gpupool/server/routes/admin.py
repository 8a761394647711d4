"""Pools, priority classes, users and tokens, the audit log, server status."""

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from gpupool import __version__
from gpupool.model import SpecError
from gpupool.scheduler.placer import POLICY_NAMES
from gpupool.scheduler.reservations import iso
from gpupool.server.auth import SESSION_PREFIX, Principal, Role, issue_token
from gpupool.server.db.tables import (
    AuditRow,
    Meta,
    NodeRow,
    Pool,
    PriorityClassRow,
    TokenRow,
    UserRow,
)
from gpupool.server.deps import (
    Caller,
    Ctx,
    Id,
    Limit,
    Offset,
    ServerContext,
    human,
    may_administer,
    require,
)
from gpupool.server.errors import ApiError, forbidden, not_found
from gpupool.server.pool_modes import follow_pool_mode
from gpupool.server.routes.views import page
from gpupool.server.schemas import (
    AuditOut,
    Page,
    PoolIn,
    PoolOut,
    PriorityClassIn,
    PriorityClassOut,
    TokenIn,
    TokenInfo,
    TokenOut,
    UserIn,
    UserOut,
    UserPatch,
)

router = APIRouter(prefix="/api/v1", tags=["admin"])
ADMIN = (Role.ADMIN,)
MAX_LIVE_TOKENS = 50  # per user: enough for every machine of one person, not a flood


def _scheduler_name(ctx: ServerContext) -> str | None:
    """Which process leads the scheduler (host:pid), as it recorded when it took the lead."""
    with ctx.db.read() as s:
        return s.execute(select(Meta.leader_name).where(Meta.id == 1)).scalar()


@router.get("/status")
def status(ctx: Ctx, who: Caller) -> dict[str, object]:
    """Version, database backend, whether this process leads the scheduler, and who the
    caller is (user, role, tenant: ``gpupool whoami``)."""
    out: dict[str, object] = {
        "version": __version__,
        "user": who.user,
        "role": str(who.role),
        "tenant": who.tenant,
        "backend": "sqlite" if ctx.db.is_sqlite else "postgresql",
        "leader": ctx.loop.is_leader,  # this process (a worker's stands by for the scheduler's)
        "scheduler": _scheduler_name(ctx),
        "cycles": ctx.loop.cycles,
        "last_cycle_error": ctx.loop.last_error,
        "billing_zone": ctx.settings.billing_zone,  # where a month starts and ends
    }
    if who.is_admin:  # each control-plane duty here: last success, failures, the last error
        out["duties"] = {**ctx.loop.duties.report(), **ctx.loop.service_duties.report()}
        out["agent_versions"] = _agent_versions(ctx)
    return out


def _agent_versions(ctx: ServerContext) -> dict[str, int]:
    """How many nodes each agent release runs ("unknown": not said) — an upgrade's progress."""
    q = select(NodeRow.agent_version, func.count()).where(NodeRow.source == "agent")
    with ctx.db.read() as s:
        rows = s.execute(q.group_by(NodeRow.agent_version)).all()
    return {str(version or "unknown"): int(n) for version, n in rows}


# -- pools ------------------------------------------------------------------------------------
@router.get("/pools", response_model=list[PoolOut])
def list_pools(ctx: Ctx, who: Caller) -> list[PoolOut]:
    with ctx.db.read() as s:
        rows = s.execute(select(Pool).order_by(Pool.name)).scalars()
        return [PoolOut.model_validate(p, from_attributes=True) for p in rows]


@router.put("/pools/{name}", response_model=PoolOut)
def put_pool(name: str, body: PoolIn, ctx: Ctx, who: Caller) -> PoolOut:
    require(who, ADMIN, "changing pools")
    if body.name != name:
        raise ApiError(422, f"name: body says {body.name}, path says {name}", "name")
    if body.policy not in POLICY_NAMES:
        raise ApiError(422, f"policy: must be one of {', '.join(POLICY_NAMES)}", "policy")
    bounded = body.mig_cards_min > 0 or body.mig_cards_max is not None
    if bounded and body.sharing != "hybrid":
        raise ApiError(
            422, "mig_cards_min/mig_cards_max: only a hybrid pool has them", "mig_cards_min"
        )
    if body.mig_cards_max is not None and body.mig_cards_min > body.mig_cards_max:
        said = f"mig_cards_min: {body.mig_cards_min} is above mig_cards_max {body.mig_cards_max}"
        raise ApiError(422, said, "mig_cards_min")
    with ctx.db.write() as s:
        row = s.get(Pool, name)
        if row is None:
            row = Pool(name=name)
            s.add(row)
        row.sharing, row.policy, row.description = body.sharing, body.policy, body.description
        row.mig_cards_min, row.mig_cards_max = body.mig_cards_min, body.mig_cards_max
        s.flush()
        change = follow_pool_mode(s, row)
        out = PoolOut.model_validate(row, from_attributes=True)
        out.note = change.note(row.sharing)
    ctx.capacity.invalidate()  # what the pool can ever hold changed with its cards' modes
    ctx.loop.wake()
    return out


@router.delete("/pools/{name}", status_code=204)
def delete_pool(name: str, ctx: Ctx, who: Caller) -> None:
    require(who, ADMIN, "changing pools")
    with ctx.db.write() as s:
        row = s.get(Pool, name)
        if row is None:
            raise not_found(f"pool {name}")
        if s.execute(select(NodeRow.name).where(NodeRow.pool == name)).first():
            raise ApiError(409, f"pool {name} still has nodes")
        s.delete(row)


# -- priority classes -------------------------------------------------------------------------
@router.get("/priority-classes", response_model=list[PriorityClassOut])
def list_classes(ctx: Ctx, who: Caller) -> list[PriorityClassOut]:
    with ctx.db.read() as s:
        rows = s.execute(select(PriorityClassRow).order_by(PriorityClassRow.value.desc()))
        return [PriorityClassOut.model_validate(c, from_attributes=True) for c in rows.scalars()]


@router.put("/priority-classes/{name}", response_model=PriorityClassOut)
def put_class(name: str, body: PriorityClassIn, ctx: Ctx, who: Caller) -> PriorityClassOut:
    require(who, ADMIN, "changing priority classes")
    if body.name != name:
        raise ApiError(422, f"name: body says {body.name}, path says {name}", "name")
    with ctx.db.write() as s:
        row = s.get(PriorityClassRow, name)
        if row is None:
            row = PriorityClassRow(name=name)
            s.add(row)
        row.value, row.description = body.value, body.description
        s.flush()
        return PriorityClassOut.model_validate(row, from_attributes=True)


# -- users and tokens -------------------------------------------------------------------------
@router.post("/users", status_code=201, response_model=TokenOut)
def create_user(body: UserIn, ctx: Ctx, who: Caller, request: Request) -> TokenOut:
    """Create a user and its first token (shown once). Tenant-admins create members and
    viewers of their subtree."""
    human(who)
    if not who.is_admin:
        if who.role is not Role.TENANT_ADMIN or body.role not in ("member", "viewer"):
            raise forbidden(f"{who.user} may not create {body.role} users")
        if body.tenant is None or not who.sees(body.tenant):
            raise forbidden(f"tenant {body.tenant} is outside {who.user}'s tenants")
    with ctx.db.write() as s:
        if s.get(UserRow, body.name) is not None:
            raise ApiError(409, f"user {body.name} already exists", "name")
        try:
            token, token_id = issue_token(
                s, body.name, body.role, body.tenant, body.node, body.expires_at
            )
        except SpecError as exc:
            raise ApiError(422, str(exc), exc.field) from None
    request.state.audit_target = f"user {body.name}"
    return TokenOut(
        id=token_id, user=body.name, token=token, prefix=token[:10], expires_at=body.expires_at
    )


@router.get("/users", response_model=list[UserOut])
def list_users(ctx: Ctx, who: Caller) -> list[UserOut]:
    require(who, (Role.ADMIN, Role.TENANT_ADMIN), "listing users")
    with ctx.db.read() as s:
        rows = s.execute(select(UserRow).order_by(UserRow.name)).scalars()
        return [
            UserOut.model_validate(u, from_attributes=True)
            for u in rows
            if who.is_admin or (u.tenant is not None and who.sees(u.tenant))
        ]


@router.patch("/users/{name}", response_model=UserOut)
def patch_user(name: str, body: UserPatch, ctx: Ctx, who: Caller, request: Request) -> UserOut:
    """Disable a user (every token stops at once) or enable it again: admins for anyone,
    tenant-admins for the members and viewers of their subtree (whom they may create)."""
    human(who)
    with ctx.db.write() as s:
        user = s.get(UserRow, name, with_for_update=True)
        if user is None or not (who.is_admin or (user.tenant and who.sees(user.tenant))):
            raise not_found(f"user {name}")
        if not who.is_admin and not (
            who.role is Role.TENANT_ADMIN and user.role in (Role.MEMBER, Role.VIEWER)
        ):
            raise forbidden(f"{who.user} ({who.role}) may not disable {user.role} {name}")
        if user.name == who.user and body.disabled:
            raise ApiError(409, "you cannot disable yourself", "disabled")
        user.disabled = body.disabled
        s.flush()
        out = UserOut.model_validate(user, from_attributes=True)
    ctx.forget_principals()
    request.state.audit_target = f"user {name} disabled={body.disabled}"
    return out


def _new_token_expiry(who: Principal, name: str, wanted: float | None) -> float | None:
    """A token someone mints for themselves never outlives the token that mints it (a leaked
    short-lived token cannot become a permanent one); admins minting for others choose."""
    if who.user != name or who.is_admin or who.expires_at is None:
        return wanted
    if wanted is None:
        return who.expires_at
    if wanted > who.expires_at:
        raise forbidden(
            f"a new token may not outlive the one creating it (expires {iso(who.expires_at)})"
        )
    return wanted


def _live_tokens(s: Session, name: str) -> int:
    """Live API tokens of a user (dashboard sessions are capped on their own)."""
    now = time.time()
    q = select(func.count()).where(
        TokenRow.user == name,
        TokenRow.revoked.is_(False),
        TokenRow.prefix.not_like(f"{SESSION_PREFIX}%"),
        or_(TokenRow.expires_at.is_(None), TokenRow.expires_at > now),
    )
    return s.execute(q).scalar_one()


@router.post("/users/{name}/tokens", status_code=201, response_model=TokenOut)
def new_token(
    name: str, ctx: Ctx, who: Caller, request: Request, body: TokenIn | None = None
) -> TokenOut:
    """Another token for a user (optionally expiring): admins for anyone, tenant-admins for
    users below their tenant, everyone for themselves (never outliving their own token)."""
    human(who)
    expires_at = _new_token_expiry(who, name, body.expires_at if body else None)
    with ctx.db.write() as s:
        user = s.get(UserRow, name)
        if user is None:
            raise not_found(f"user {name}")
        if who.user != name:
            if user.tenant is None:
                require(who, ADMIN, "issuing tokens")
            else:
                may_administer(who, user.tenant, "issue tokens")
        if user.disabled:
            raise ApiError(409, f"user {name} is disabled")
        if _live_tokens(s, name) >= MAX_LIVE_TOKENS:
            raise ApiError(409, f"user {name} has {MAX_LIVE_TOKENS} live tokens; revoke some")
        try:
            token, token_id = issue_token(s, name, user.role, user.tenant, user.node, expires_at)
        except SpecError as exc:
            raise ApiError(422, str(exc), exc.field) from None
    request.state.audit_target = f"user {name}"
    return TokenOut(id=token_id, user=name, token=token, prefix=token[:10], expires_at=expires_at)


@router.get("/tokens", response_model=list[TokenInfo])
def list_tokens(ctx: Ctx, who: Caller) -> list[TokenInfo]:
    """Token prefixes (never the secrets): all for admins, one's own for everyone else."""
    q = select(TokenRow).order_by(TokenRow.id)
    if not who.is_admin:
        q = q.where(TokenRow.user == who.user)
    with ctx.db.read() as s:
        return [TokenInfo.model_validate(t, from_attributes=True) for t in s.execute(q).scalars()]


@router.delete("/tokens/{token_id}", status_code=204)
def revoke_token(token_id: Id, ctx: Ctx, who: Caller) -> None:
    with ctx.db.write() as s:
        t = s.get(TokenRow, token_id)
        if t is None or (not who.is_admin and t.user != who.user):
            raise not_found(f"token {token_id}")
        t.revoked = True
    ctx.forget_principals()


# -- audit ------------------------------------------------------------------------------------
@router.get("/audit", response_model=Page[AuditOut])
def audit(
    ctx: Ctx,
    who: Caller,
    limit: Limit = 100,
    offset: Offset = 0,
    actor: Annotated[str | None, Query(max_length=100)] = None,
    action: Annotated[str | None, Query(max_length=100, description="part of it")] = None,
) -> Page[AuditOut]:
    """Every mutating API call, newest first (admins); ``actor`` exactly, ``action`` (e.g.
    ``DELETE`` or ``/tokens``) anywhere in the method and route."""
    require(who, ADMIN, "reading the audit log")
    q = select(AuditRow).order_by(AuditRow.id.desc())
    if actor is not None:
        q = q.where(AuditRow.actor == actor)
    if action:
        q = q.where(AuditRow.action.contains(action, autoescape=True))
    with ctx.db.read() as s:
        rows, total = page(s, q, limit, offset)
        items = [AuditOut.model_validate(a, from_attributes=True) for a in rows]
    return Page(items=items, total=total, limit=limit, offset=offset)

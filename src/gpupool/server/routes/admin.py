"""Pools, priority classes, users and tokens, reservations, the audit log, server status."""

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy import select

from gpupool import __version__
from gpupool.model import SpecError
from gpupool.scheduler.placer import POLICY_NAMES
from gpupool.server.auth import Role, create_user_token
from gpupool.server.db.tables import (
    AuditRow,
    NodeRow,
    Pool,
    PriorityClassRow,
    ReservationRow,
    TenantRow,
    TokenRow,
    UserRow,
)
from gpupool.server.deps import Caller, Ctx, Id, Limit, Offset, human, may_administer, require
from gpupool.server.errors import ApiError, forbidden, not_found
from gpupool.server.routes.views import page
from gpupool.server.schemas import (
    AuditOut,
    Page,
    PoolIn,
    PoolOut,
    PriorityClassIn,
    PriorityClassOut,
    ReservationIn,
    ReservationOut,
    TokenInfo,
    TokenOut,
    UserIn,
    UserOut,
)

router = APIRouter(prefix="/api/v1", tags=["admin"])
ADMIN = (Role.ADMIN,)


@router.get("/status")
def status(ctx: Ctx, who: Caller) -> dict[str, object]:
    """Version, database backend, and whether this process leads the scheduler."""
    return {
        "version": __version__,
        "backend": "sqlite" if ctx.db.is_sqlite else "postgresql",
        "leader": ctx.loop.is_leader,
        "cycles": ctx.loop.cycles,
        "last_cycle_error": ctx.loop.last_error,
    }


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
    with ctx.db.write() as s:
        row = s.get(Pool, name)
        if row is None:
            row = Pool(name=name)
            s.add(row)
        row.sharing, row.policy, row.description = body.sharing, body.policy, body.description
        s.flush()
        return PoolOut.model_validate(row, from_attributes=True)


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
            token = create_user_token(s, body.name, body.role, body.tenant, body.node)
        except SpecError as exc:
            raise ApiError(422, str(exc), exc.field) from None
    request.state.audit_target = f"user {body.name}"
    return TokenOut(user=body.name, token=token, prefix=token[:10])


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


@router.post("/users/{name}/tokens", status_code=201, response_model=TokenOut)
def new_token(name: str, ctx: Ctx, who: Caller, request: Request) -> TokenOut:
    """Another token for a user: admins for anyone, everyone for themselves."""
    with ctx.db.write() as s:
        user = s.get(UserRow, name)
        if user is None:
            raise not_found(f"user {name}")
        if who.user != name:
            if user.tenant is None:
                require(who, ADMIN, "issuing tokens")
            else:
                may_administer(who, user.tenant, "issue tokens")
        token = create_user_token(s, name, user.role, user.tenant, user.node)
    request.state.audit_target = f"user {name}"
    return TokenOut(user=name, token=token, prefix=token[:10])


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


# -- reservations -----------------------------------------------------------------------------
@router.post("/reservations", status_code=201, response_model=ReservationOut)
def create_reservation(body: ReservationIn, ctx: Ctx, who: Caller) -> ReservationOut:
    """Lock nodes for a tenant over [start, end) (epoch seconds)."""
    human(who)
    if body.end <= body.start:
        raise ApiError(422, "end: must be after start", "end")
    may_administer(who, body.tenant, "reserve nodes")
    with ctx.db.write() as s:
        if s.get(TenantRow, body.tenant) is None:
            raise ApiError(422, f"tenant: unknown tenant {body.tenant!r}", "tenant")
        known = set(s.execute(select(NodeRow.name).where(NodeRow.name.in_(body.nodes))).scalars())
        missing = [n for n in body.nodes if n not in known]
        if missing:
            raise ApiError(422, f"nodes: unknown node {missing[0]!r}", "nodes")
        row = ReservationRow(
            tenant=body.tenant,
            nodes=list(dict.fromkeys(body.nodes)),
            start=body.start,
            end=body.end,
            created_by=who.user,
        )
        s.add(row)
        s.flush()
        out = ReservationOut.model_validate(row, from_attributes=True)
    ctx.loop.wake()
    return out


@router.get("/reservations", response_model=list[ReservationOut])
def list_reservations(ctx: Ctx, who: Caller) -> list[ReservationOut]:
    human(who)
    q = select(ReservationRow).where(ReservationRow.end > time.time()).order_by(ReservationRow.id)
    with ctx.db.read() as s:
        return [
            ReservationOut.model_validate(r, from_attributes=True)
            for r in s.execute(q).scalars()
            if who.sees(r.tenant)
        ]


@router.delete("/reservations/{res_id}", status_code=204)
def delete_reservation(res_id: Id, ctx: Ctx, who: Caller) -> None:
    human(who)
    with ctx.db.write() as s:
        r = s.get(ReservationRow, res_id)
        if r is None or not who.sees(r.tenant):
            raise not_found(f"reservation {res_id}")
        if not who.is_admin:
            may_administer(who, r.tenant, "cancel reservations")
        s.delete(r)
    ctx.loop.wake()


# -- audit ------------------------------------------------------------------------------------
@router.get("/audit", response_model=Page[AuditOut])
def audit(
    ctx: Ctx,
    who: Caller,
    limit: Limit = 100,
    offset: Offset = 0,
    actor: Annotated[str | None, Query(max_length=100)] = None,
) -> Page[AuditOut]:
    """Every mutating API call, newest first (admins)."""
    require(who, ADMIN, "reading the audit log")
    q = select(AuditRow).order_by(AuditRow.id.desc())
    if actor is not None:
        q = q.where(AuditRow.actor == actor)
    with ctx.db.read() as s:
        rows, total = page(s, q, limit, offset)
        items = [AuditOut.model_validate(a, from_attributes=True) for a in rows]
    return Page(items=items, total=total, limit=limit, offset=offset)

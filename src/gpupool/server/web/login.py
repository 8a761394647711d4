"""Log in with an API token (the dashboard keeps a session token of the same user, not the
token typed in) and log out (the session token is revoked)."""

import time
from typing import Annotated

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select, update

from gpupool.server.auth import SESSION_PREFIX, Principal, Role, issue_token, token_hash
from gpupool.server.client_address import client_address, is_https
from gpupool.server.db.tables import AuditRow, TokenRow
from gpupool.server.deps import Ctx, ServerContext, lookup_principal, principal_of, throttle
from gpupool.server.errors import ApiError, forbidden
from gpupool.server.middleware import audit_values
from gpupool.server.session import SESSION_COOKIE, check_csrf, same_origin

router = APIRouter(prefix="/ui", include_in_schema=False)
NOT_HUMAN = (Role.AGENT, Role.METRICS, Role.KUBERNETES)
MAX_SESSIONS = 20  # per user; logging in again ends the oldest beyond this


class LoginIn(BaseModel):
    token: Annotated[str, Field(min_length=1, max_length=200)]


def _audit(ctx: ServerContext, request: Request, who: Principal | None, status: int) -> None:
    request.state.principal = who
    values = audit_values(request.scope, status)
    with ctx.db.write() as s:
        s.add(AuditRow(**values))


def _start(ctx: ServerContext, who: Principal) -> tuple[str, float]:
    """A new session token for ``who``, ending after ``session_hours`` or with the token
    that logged in, whichever comes first."""
    end = time.time() + ctx.settings.session_hours * 3600
    if who.expires_at is not None:
        end = min(end, who.expires_at)
    with ctx.db.write() as s:
        live = s.execute(
            select(TokenRow.id)
            .where(
                TokenRow.user == who.user,
                TokenRow.revoked.is_(False),
                TokenRow.prefix.like(f"{SESSION_PREFIX}%"),
                TokenRow.expires_at > time.time(),
            )
            .order_by(TokenRow.id)
        ).scalars()
        oldest = list(live)[: -(MAX_SESSIONS - 1)]
        if oldest:
            s.execute(update(TokenRow).where(TokenRow.id.in_(oldest)).values(revoked=True))
        token, _ = issue_token(
            s, who.user, who.role, who.tenant, who.node, end, prefix=SESSION_PREFIX
        )
    if oldest:
        ctx.forget_principals()
    return token, end


@router.post("/session")
async def log_in(body: LoginIn, request: Request, ctx: Ctx) -> JSONResponse:
    """Exchange an API token for a session cookie (HttpOnly, SameSite=Strict, Secure over
    HTTPS). Bad tokens count towards the address's failed-authentication limit."""
    if not same_origin(request):
        raise forbidden("log in from this server's own login page")
    address = client_address(request)
    now = time.time()
    who = await principal_of(ctx, body.token.strip(), now)
    if who is None:
        throttle(ctx, address, now)
        ctx.auth_failures.failed(address, now)
        await run_in_threadpool(_audit, ctx, request, None, 401)
        raise ApiError(401, "unknown, revoked or expired token, or a disabled user", "token")
    if who.role in NOT_HUMAN:
        raise forbidden(f"{who.role} tokens cannot log in to the dashboard")
    token, end = await run_in_threadpool(_start, ctx, who)
    await run_in_threadpool(_audit, ctx, request, who, 200)
    resp = JSONResponse({"user": who.user, "role": str(who.role), "expires_at": end})
    resp.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=max(1, int(end - now)),
        httponly=True,
        samesite="strict",
        secure=is_https(request),
        path="/",
    )
    return resp


@router.post("/logout")
async def log_out(request: Request, ctx: Ctx) -> JSONResponse:
    """Revoke this browser's session and clear its cookie."""
    token = request.cookies.get(SESSION_COOKIE, "")
    if token:
        check_csrf(request, token)
        who = await run_in_threadpool(lookup_principal, ctx.db, token)

        def revoke() -> None:
            with ctx.db.write() as s:
                s.execute(
                    update(TokenRow)
                    .where(TokenRow.token_hash == token_hash(token))
                    .values(revoked=True)
                )

        await run_in_threadpool(revoke)
        ctx.forget_principals()
        if who is not None:
            await run_in_threadpool(_audit, ctx, request, who, 200)
    resp = JSONResponse({"logged_out": True})
    resp.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return resp

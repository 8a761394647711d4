"""The join flow (``gpupool node token create``, ``gpupool join``): bootstrap tokens
for admins, the server's certificate chain for a joining server to pin, and the trade of a
bootstrap token for a node credential. ``/join`` and ``/join/ca`` take no bearer token: the
bootstrap token in the body is the credential, and a wrong one counts as a failed
authentication of the caller's address (429 after a few)."""

import time

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from gpupool.server.auth import Role
from gpupool.server.client_address import client_address
from gpupool.server.db.tables import JoinTokenRow
from gpupool.server.deps import Caller, Ctx, Id, require, throttle
from gpupool.server.errors import ApiError, not_found
from gpupool.server.join import (
    JoinIn,
    JoinOut,
    JoinRefused,
    JoinTokenIn,
    JoinTokenInfo,
    JoinTokenOut,
    ca_hash,
    create_join_token,
    trade,
)

router = APIRouter(prefix="/api/v1", tags=["join"])


def _chain(ctx: Ctx) -> str | None:
    path = ctx.settings.tls_cert_file
    return path.read_text() if path is not None else None


@router.post("/join-tokens", status_code=201, response_model=JoinTokenOut)
def create(body: JoinTokenIn, ctx: Ctx, who: Caller) -> JoinTokenOut:
    require(who, (Role.ADMIN,), "making bootstrap tokens")
    with ctx.db.write() as s:
        token, row = create_join_token(s, body, who.user, time.time())
        info = JoinTokenInfo.model_validate(row, from_attributes=True)
    return JoinTokenOut(**info.model_dump(), token=token, ca_hash=ca_hash(_chain(ctx)))


@router.get("/join-tokens", response_model=list[JoinTokenInfo])
def listing(ctx: Ctx, who: Caller) -> list[JoinTokenInfo]:
    require(who, (Role.ADMIN,), "listing bootstrap tokens")
    with ctx.db.read() as s:
        rows = s.execute(select(JoinTokenRow).order_by(JoinTokenRow.id)).scalars()
        return [JoinTokenInfo.model_validate(r, from_attributes=True) for r in rows]


@router.delete("/join-tokens/{token_id}", status_code=204)
def revoke(token_id: Id, ctx: Ctx, who: Caller) -> None:
    require(who, (Role.ADMIN,), "revoking bootstrap tokens")
    with ctx.db.write() as s:
        row = s.get(JoinTokenRow, token_id)
        if row is None:
            raise not_found(f"bootstrap token {token_id}")
        row.uses_left = 0


@router.get("/join/ca", response_class=PlainTextResponse)
def server_chain(ctx: Ctx) -> PlainTextResponse:
    """The server's certificate chain (public), for a joining server to check against its
    pin before it trusts this server with its bootstrap token."""
    chain = _chain(ctx)
    if chain is None:
        raise ApiError(404, "this server does not serve HTTPS (no --tls-cert): nothing to pin")
    return PlainTextResponse(chain, media_type="application/x-pem-file")


@router.post("/join", response_model=JoinOut)
def join(body: JoinIn, request: Request, ctx: Ctx) -> JoinOut:
    now = time.time()
    address = client_address(request)
    throttle(ctx, address, now)
    try:
        with ctx.db.write() as s:
            out = trade(s, body, now)
    except JoinRefused as exc:
        ctx.auth_failures.failed(address, now)
        raise ApiError(401, f"join refused: {exc}") from None
    except IntegrityError:
        raise ApiError(409, f"node {body.node} is joining from elsewhere at this moment") from None
    ctx.forget_principals()
    return out

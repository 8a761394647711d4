"""The join flow's server side: bootstrap tokens, and trading one for a node credential.

Like ``kubeadm join``: an admin makes a short-lived token of bounded uses (one by default),
a new GPU server presents it once and gets a token of its own — role agent, scoped to its
node — and the bootstrap token is spent. A node that already has a live credential is not
given a second one (``gpupool node remove`` revokes it first), so a leaked bootstrap token
cannot take over a running node."""

from typing import Annotated

from pydantic import BaseModel, Field
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpupool.model import SpecError
from gpupool.model.cert_pins import certificates, fingerprint
from gpupool.server.auth import Role, issue_token, new_token, token_hash
from gpupool.server.db.rows_changed import rows_changed
from gpupool.server.db.tables import JoinTokenRow, TokenRow, UserRow
from gpupool.server.schemas import NodeName, Strict

JOIN_PREFIX = "gpj_"
MAX_TTL_S = 7 * 86400


class JoinTokenIn(Strict):
    ttl_s: int = Field(3600, ge=60, le=MAX_TTL_S)
    uses: int = Field(1, ge=1, le=10_000)
    node: NodeName | None = None  # the only name it joins; None: any


class JoinTokenInfo(BaseModel):
    id: int
    prefix: str
    created_by: str
    created_at: float
    expires_at: float
    uses_left: int
    node: str | None


class JoinTokenOut(JoinTokenInfo):
    token: str  # shown once
    ca_hash: str | None  # the pin of the server's top certificate; None: no HTTPS here


class JoinIn(Strict):
    token: Annotated[str, Field(min_length=1, max_length=200)]
    node: NodeName


class JoinOut(BaseModel):
    node: str
    user: str
    token: str  # the node's own credential, shown once


class JoinRefused(Exception):
    """A bootstrap token that cannot be used (unknown, expired, spent, another node's)."""


def ca_hash(chain_pem: str | None) -> str | None:
    """The pin an admin hands to joining servers: the last certificate of the server's chain
    file (its CA when the file carries it, else the server's own certificate)."""
    found = certificates(chain_pem or "")
    return fingerprint(found[-1]) if found else None


def create_join_token(
    s: Session, body: JoinTokenIn, by: str, now: float
) -> tuple[str, JoinTokenRow]:
    token = new_token(JOIN_PREFIX)
    row = JoinTokenRow(
        token_hash=token_hash(token),
        prefix=token[:10],
        created_by=by,
        created_at=now,
        expires_at=now + body.ttl_s,
        uses_left=body.uses,
        node=body.node,
    )
    s.add(row)
    s.flush()
    return token, row


def agent_user(node: str) -> str:
    """The user a joined node's credential belongs to (user names take no ':')."""
    name = f"agent-{node}"
    if len(name) > 100 or ":" in name:
        raise SpecError(
            f"node: {node!r} cannot name its agent user (letters, digits, '.', '_', '-'; at "
            "most 94 characters)",
            field="node",
        )
    return name


def has_live_credential(s: Session, node: str, now: float) -> bool:
    """An unrevoked, unexpired token of an agent user scoped to exactly this node."""
    q = (
        select(TokenRow.id)
        .join(UserRow, UserRow.name == TokenRow.user)
        .where(UserRow.role == Role.AGENT, UserRow.node == node, TokenRow.revoked.is_(False))
        .where((TokenRow.expires_at.is_(None)) | (TokenRow.expires_at > now))
    )
    return s.execute(q.limit(1)).first() is not None


def trade(s: Session, body: JoinIn, now: float) -> JoinOut:
    """Spend one use of the bootstrap token for a credential of ``body.node``. The use is
    taken by a conditional update, so two servers racing for a token of one use cannot both
    win."""
    row = s.execute(
        select(JoinTokenRow).where(JoinTokenRow.token_hash == token_hash(body.token))
    ).scalar_one_or_none()
    if row is None or row.expires_at <= now or row.uses_left <= 0:
        raise JoinRefused("unknown, expired or spent bootstrap token")
    if row.node is not None and row.node != body.node:
        raise JoinRefused(f"this bootstrap token joins node {row.node} only")
    user = agent_user(body.node)
    # joins of one node name wait for each other here (a new name: the user row's insert
    # collides instead, which the route answers 409)
    s.execute(select(UserRow.name).where(UserRow.name == user).with_for_update()).all()
    if has_live_credential(s, body.node, now):
        raise SpecError(
            f"node {body.node} already has a credential; to join it again, remove it first "
            f"(gpupool node remove {body.node})",
            field="node",
        )
    taken = rows_changed(
        s,
        update(JoinTokenRow)
        .where(JoinTokenRow.id == row.id, JoinTokenRow.uses_left > 0)
        .values(uses_left=JoinTokenRow.uses_left - 1),
    )
    if not taken:
        raise JoinRefused("unknown, expired or spent bootstrap token")
    token, _ = issue_token(s, user, Role.AGENT, None, body.node)
    return JoinOut(node=body.node, user=user, token=token)


def revoke_node_credentials(s: Session, node: str) -> int:
    """Revoke every token of the agent users scoped to exactly ``node`` (its removal)."""
    users = select(UserRow.name).where(UserRow.role == Role.AGENT, UserRow.node == node)
    return rows_changed(
        s,
        update(TokenRow)
        .where(TokenRow.user.in_(users), TokenRow.revoked.is_(False))
        .values(revoked=True),
    )

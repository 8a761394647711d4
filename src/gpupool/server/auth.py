"""API tokens and roles. A token is random, shown once, stored only as its SHA-256 (a
256-bit random secret needs no slow hash: there is nothing to brute-force)."""

import hashlib
import secrets
import time
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.model import SpecError
from gpupool.server.db.tables import NodeRow, TenantRow, TokenRow, UserRow

TOKEN_PREFIX = "gp_"
SESSION_PREFIX = "gps_"  # a browser session's token (the dashboard): listed like any token


class Role(StrEnum):
    ADMIN = "admin"  # everything
    TENANT_ADMIN = "tenant-admin"  # its subtree: quotas, users, jobs
    MEMBER = "member"  # submits and manages its own tenant's jobs
    VIEWER = "viewer"  # reads its subtree
    FINANCE = "finance"  # reads usage (and invoices) of its subtree, or of all without a tenant
    AGENT = "agent"  # one node's registration, heartbeats and allocations
    METRICS = "metrics"  # reads /metrics only (a Prometheus scrape token)
    KUBERNETES = "kubernetes"  # the Kubernetes-mode scheduler: mirrors its nodes and pods


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the user, its role, and the tenants it may see (None: all)."""

    user: str
    role: Role
    tenant: str | None
    node: str | None
    visible: frozenset[str] | None
    expires_at: float | None = None  # of the token this caller used (None: never)

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def sees(self, tenant: str) -> bool:
        return self.visible is None or tenant in self.visible


def new_token(prefix: str = TOKEN_PREFIX) -> str:
    return prefix + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def subtree(session: Session, root: str) -> frozenset[str]:
    """``root`` and every tenant below it."""
    children: dict[str | None, list[str]] = {}
    for name, parent in session.execute(select(TenantRow.name, TenantRow.parent)):
        children.setdefault(parent, []).append(name)
    out, stack = {root}, [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in out:
                out.add(child)
                stack.append(child)
    return frozenset(out)


def validate_user(role: str, tenant: str | None, node: str | None) -> Role:
    """Which combinations of role, tenant and node scope make sense."""
    try:
        r = Role(role)
    except ValueError:
        raise SpecError(
            f"role: {role!r} is not one of {', '.join(Role)}", field="role", token=role
        ) from None
    if r in (Role.TENANT_ADMIN, Role.MEMBER, Role.VIEWER) and not tenant:
        raise SpecError(f"role {r}: a tenant is required", field="tenant")
    if r is Role.ADMIN and tenant:
        raise SpecError("role admin: takes no tenant (admins see every tenant)", field="tenant")
    if r in (Role.AGENT, Role.METRICS, Role.KUBERNETES) and tenant:
        raise SpecError(f"role {r}: takes no tenant", field="tenant")
    if r is not Role.AGENT and node:
        raise SpecError(f"role {r}: only agents have a node scope", field="node")
    return r


def create_user_token(
    session: Session,
    name: str,
    role: str,
    tenant: str | None = None,
    node: str | None = None,
    expires_at: float | None = None,
) -> str:
    """Create (or reuse) user ``name`` and give it a new token (valid until ``expires_at``,
    epoch seconds, or for ever); returns the token."""
    return issue_token(session, name, role, tenant, node, expires_at)[0]


def issue_token(
    session: Session,
    name: str,
    role: str,
    tenant: str | None = None,
    node: str | None = None,
    expires_at: float | None = None,
    prefix: str = TOKEN_PREFIX,
) -> tuple[str, int]:
    """``create_user_token``, also returning the new token's row id (for revoking it)."""
    r = validate_user(role, tenant, node)
    if tenant is not None and session.get(TenantRow, tenant) is None:
        raise SpecError(f"tenant: unknown tenant {tenant!r}", field="tenant")
    user = session.get(UserRow, name)
    now = time.time()
    if user is None:
        session.add(UserRow(name=name, role=r, tenant=tenant, node=node, created_at=now))
        session.flush()  # the token row refers to it
    elif (user.role, user.tenant, user.node) != (r, tenant, node):
        raise SpecError(
            f"user {name}: exists as {user.role} of {user.tenant or 'all tenants'}",
            field="name",
        )
    if expires_at is not None and expires_at <= now:
        raise SpecError("expires: must be in the future", field="expires")
    token = new_token(prefix)
    row = TokenRow(
        user=name,
        token_hash=token_hash(token),
        prefix=token[:10],
        created_at=now,
        expires_at=expires_at,
    )
    session.add(row)
    session.flush()
    return token, row.id


REFUSED = "unknown, revoked or expired token, or a disabled user"


def refusal_for(session: Session, token: str) -> str:
    """Why a token that has no principal is refused: said plainly for an agent's token
    revoked with its node (``gpupool node remove``) — its agent stops on it — else the one
    sentence for every other refusal (a guess learns nothing)."""
    found = session.execute(
        select(TokenRow.revoked, UserRow.role, UserRow.node)
        .join(UserRow, TokenRow.user == UserRow.name)
        .where(TokenRow.token_hash == token_hash(token))
    ).one_or_none()
    if found is None:
        return REFUSED
    revoked, role, node = found
    if revoked and role == Role.AGENT and node and node != "*" and not session.get(NodeRow, node):
        return (
            f"node {node} was removed (gpupool node remove) and this agent's credential "
            "revoked with it; to come back the node joins again (gpupool join)"
        )
    return REFUSED


def principal_for(session: Session, token: str, now: float | None = None) -> Principal | None:
    """The principal a bearer token stands for, or None if unknown, revoked, expired or its
    user is disabled."""
    now = time.time() if now is None else now
    found = session.execute(
        select(UserRow, TokenRow.expires_at)
        .join(TokenRow, TokenRow.user == UserRow.name)
        .where(TokenRow.token_hash == token_hash(token), TokenRow.revoked.is_(False))
    ).one_or_none()
    if found is None:
        return None
    row, expires_at = found
    return principal_of_user(session, row, expires_at, now)


def principal_of_user(
    session: Session, row: UserRow, expires_at: float | None, now: float
) -> Principal | None:
    """The principal of user ``row`` through a credential that ends at ``expires_at``; None
    if the user is disabled or the credential expired."""
    if row.disabled or (expires_at is not None and expires_at <= now):
        return None
    role = Role(row.role)
    visible: frozenset[str] | None
    if role is Role.ADMIN or (role is Role.FINANCE and row.tenant is None):
        visible = None
    elif row.tenant is None:
        visible = frozenset()
    else:
        visible = subtree(session, row.tenant)
    return Principal(row.name, role, row.tenant, row.node, visible, expires_at)

"""A browser's way into a notebook (docs/interactive.md, "Notebooks"), so the printed URL
works in a browser without the long-lived API token ever being put in a URL:

- a **link** — ``/api/v1/jobs/{id}/notebook-login?ticket=SECRET`` — made by ``POST
  /api/v1/jobs/{id}/notebook-link`` with the user's token; usable once, within
  ``LINK_TTL_S``, by whoever holds it (it is a bearer secret, shown only to its maker);
- traded for a **cookie**: HttpOnly, SameSite=Strict, Secure over HTTPS, its path the
  notebook's (``/api/v1/jobs/{id}/notebook/``), good for ``COOKIE_TTL_S`` at most.

Both are stored as the SHA-256 of a 256-bit random secret, tied to one job and to the API
token that made them: they act as that token's user, never beyond that job, and die with the
token (revoked, expired, its user disabled)."""

import secrets
import time
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpupool.server.auth import Principal, principal_of_user, token_hash
from gpupool.server.db.tables import NotebookPassRow, TokenRow, UserRow

LINK_TTL_S = 120.0
COOKIE_TTL_S = 12 * 3600.0
COOKIE = "gpupool_notebook"
LINK_PREFIX, COOKIE_PREFIX = "gpnl_", "gpnc_"


class PassKind(StrEnum):
    LINK = "link"
    COOKIE = "cookie"


@dataclass(frozen=True, slots=True)
class Pass:
    job_id: int
    who: Principal
    expires_at: float
    token_id: int


def issue(s: Session, kind: PassKind, job_id: int, token_id: int, ttl: float) -> tuple[str, float]:
    """A new pass's secret and when it ends (no later than its token)."""
    now = time.time()
    end = now + ttl
    token_end = s.execute(select(TokenRow.expires_at).where(TokenRow.id == token_id)).scalar()
    if token_end is not None:
        end = min(end, token_end)
    secret = (LINK_PREFIX if kind is PassKind.LINK else COOKIE_PREFIX) + secrets.token_urlsafe(32)
    row = NotebookPassRow(
        secret_hash=token_hash(secret), kind=str(kind), job_id=job_id, token_id=token_id,
        created_at=now, expires_at=end, used=False,
    )  # fmt: skip
    s.add(row)
    return secret, end


def _lookup(s: Session, kind: PassKind, secret: str, now: float) -> NotebookPassRow | None:
    row = s.execute(
        select(NotebookPassRow).where(
            NotebookPassRow.secret_hash == token_hash(secret), NotebookPassRow.kind == str(kind)
        )
    ).scalar_one_or_none()
    if row is None or row.expires_at <= now:
        return None
    return row


def _principal(s: Session, token_id: int, now: float) -> Principal | None:
    found = s.execute(
        select(UserRow, TokenRow.expires_at)
        .join(TokenRow, TokenRow.user == UserRow.name)
        .where(TokenRow.id == token_id, TokenRow.revoked.is_(False))
    ).one_or_none()
    return None if found is None else principal_of_user(s, found[0], found[1], now)


def redeem_link(s: Session, job_id: int, secret: str) -> Pass | None:
    """The link's pass, used up by this call (a second use, even at the same moment on
    another server process, finds it used); None: unknown, expired, used, another job's,
    or its token is gone."""
    now = time.time()
    row = _lookup(s, PassKind.LINK, secret, now)
    if row is None or row.used or row.job_id != job_id:
        return None
    taken = s.execute(
        update(NotebookPassRow)
        .where(NotebookPassRow.id == row.id, NotebookPassRow.used.is_(False))
        .values(used=True)
    )
    if taken.rowcount != 1:  # type: ignore[attr-defined]
        return None
    who = _principal(s, row.token_id, now)
    return None if who is None else Pass(row.job_id, who, row.expires_at, row.token_id)


def token_id_of(s: Session, token: str) -> int | None:
    return s.execute(
        select(TokenRow.id).where(TokenRow.token_hash == token_hash(token))
    ).scalar_one_or_none()


def cookie_pass(s: Session, secret: str) -> Pass | None:
    """The cookie's pass while it, its token and its user are good."""
    now = time.time()
    row = _lookup(s, PassKind.COOKIE, secret, now)
    if row is None:
        return None
    who = _principal(s, row.token_id, now)
    return None if who is None else Pass(row.job_id, who, row.expires_at, row.token_id)

"""Alert deliveries: a JSON POST per state change, signed with HMAC-SHA256 over the body
(``X-Gpupool-Signature: sha256=<hex>``), retried with exponential backoff (2, 4, 8 … s, at
most 5 min apart) up to ``MAX_ATTEMPTS`` times; the receiver verifies the signature with the
shared secret.

An outbox: the alerts duty writes what changed (``alerts``' rows); a thread of the leader's
own reads what is due (``due``), posts it outside any transaction within a time budget
(``send``), and writes back what came of it (``record``) — a receiver that never answers
delays only its own alerts, never a submission, a heartbeat or a cycle."""

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.db.tables import AlertRow

MAX_ATTEMPTS = 10
SIGNATURE = "X-Gpupool-Signature"
Post = Callable[[str, bytes, dict[str, str]], int]  # url, body, headers -> HTTP status


def payload(row: AlertRow) -> bytes:
    body = {
        "id": row.id,
        "key": row.key,
        "kind": row.kind,
        "tenant": row.tenant,
        "subject": row.subject,
        "message": row.message,
        "state": row.state,
        "started_at": row.started_at,
        "resolved_at": row.resolved_at,
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def http_post(url: str, body: bytes, headers: dict[str, str]) -> int:
    try:
        return httpx.post(url, content=body, headers=headers, timeout=2.0).status_code
    except httpx.HTTPError:
        return 0


@dataclass(frozen=True, slots=True)
class Delivery:
    """An alert's change to send: read in one transaction, posted outside any."""

    alert_id: int
    state: str
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Sent:
    alert_id: int
    state: str  # the change that was sent
    status: int  # the receiver's HTTP status; 0: unreachable, or not sent within the pass


def due(session: Session, secret: str, now: float, limit: int = 50) -> list[Delivery]:
    """The changes not yet delivered whose next attempt is due (read only)."""
    rows = session.execute(
        select(AlertRow)
        .where(AlertRow.state != AlertRow.notified, AlertRow.next_attempt_at <= now)
        .order_by(AlertRow.id)
        .limit(limit)
    ).scalars()
    out = []
    for row in rows:
        body = payload(row)
        headers = {
            "Content-Type": "application/json",
            SIGNATURE: sign(secret, body),
            "X-Gpupool-Event": f"alert.{row.state}",
        }
        out.append(Delivery(row.id, row.state, body, headers))
    return out


def send(
    deliveries: list[Delivery], url: str, budget_s: float, post: Post = http_post
) -> list[Sent]:
    """Post each, outside any transaction, until ``budget_s`` has passed (the rest are tried
    again at their next attempt, as failures)."""
    deadline = time.monotonic() + budget_s
    out = []
    for d in deliveries:
        status = post(url, d.body, d.headers) if time.monotonic() < deadline else 0
        out.append(Sent(d.alert_id, d.state, status))
    return out


def record(session: Session, sent: list[Sent], now: float) -> int:
    """What the posts found, written back (one short transaction); how many were delivered.
    An alert that changed again meanwhile keeps its new change to send."""
    done = 0
    for s in sent:
        row = session.get(AlertRow, s.alert_id)
        if row is None or row.state != s.state or row.notified == s.state:
            continue
        if 200 <= s.status < 300:
            row.notified, row.attempts, row.last_error = row.state, 0, ""
            done += 1
            continue
        row.attempts += 1
        row.last_error = f"HTTP {s.status}" if s.status else "unreachable"
        if row.attempts >= MAX_ATTEMPTS:  # give up on this change; the next one is sent
            row.notified = row.state
            row.last_error += f"; gave up after {MAX_ATTEMPTS} attempts"
        else:
            row.next_attempt_at = now + min(300.0, 2.0**row.attempts)
    return done

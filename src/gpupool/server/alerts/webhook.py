"""Alert deliveries: a JSON POST per state change, signed with HMAC-SHA256 over the body
(``X-Gpupool-Signature: sha256=<hex>``), retried with exponential backoff (2, 4, 8 … s, at
most 5 min apart) up to ``MAX_ATTEMPTS`` times; the receiver verifies the signature with the
shared secret."""

import hashlib
import hmac
import json
from collections.abc import Callable

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


def deliver(
    session: Session, url: str, secret: str, now: float, post: Post = http_post, limit: int = 50
) -> int:
    """Send what changed since the last delivery; returns how many were delivered."""
    due = session.execute(
        select(AlertRow)
        .where(AlertRow.state != AlertRow.notified, AlertRow.next_attempt_at <= now)
        .order_by(AlertRow.id)
        .limit(limit)
    ).scalars()
    done = 0
    for row in due:
        body = payload(row)
        headers = {
            "Content-Type": "application/json",
            SIGNATURE: sign(secret, body),
            "X-Gpupool-Event": f"alert.{row.state}",
        }
        status = post(url, body, headers)
        if 200 <= status < 300:
            row.notified, row.attempts, row.last_error = row.state, 0, ""
            done += 1
            continue
        row.attempts += 1
        row.last_error = f"HTTP {status}" if status else "unreachable"
        if row.attempts >= MAX_ATTEMPTS:  # give up on this change; the next one is sent
            row.notified = row.state
            row.last_error += f"; gave up after {MAX_ATTEMPTS} attempts"
        else:
            row.next_attempt_at = now + min(300.0, 2.0**row.attempts)
    return done

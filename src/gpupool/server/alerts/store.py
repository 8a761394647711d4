"""Alerts in the state of record: one row per key; a condition that appears fires it (or
fires it again), one that goes away resolves it. Each change waits for delivery."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.alerts.rules import Firing
from gpupool.server.db.tables import AlertRow


def reconcile(session: Session, now_firing: list[Firing], now: float) -> tuple[int, int]:
    """Make the rows say what fires now; returns (fired, resolved) counts."""
    wanted = {f.key: f for f in now_firing}
    rows = {
        r.key: r
        for r in session.execute(
            select(AlertRow).where((AlertRow.state == "firing") | AlertRow.key.in_(list(wanted)))
        ).scalars()
    }
    fired = resolved = 0
    for key, f in wanted.items():
        row = rows.get(key)
        if row is None:
            session.add(
                AlertRow(
                    key=key,
                    kind=f.kind,
                    tenant=f.tenant,
                    subject=f.subject,
                    message=f.message,
                    state="firing",
                    started_at=now,
                    resolved_at=None,
                    notified="",
                    attempts=0,
                    next_attempt_at=0.0,
                    last_error="",
                )
            )
            fired += 1
        elif row.state != "firing":  # it came back: fire again
            row.state, row.started_at, row.resolved_at = "firing", now, None
            row.message, row.attempts, row.next_attempt_at = f.message, 0, 0.0
            fired += 1
        else:
            row.message = f.message  # keep it current (minutes waited, spend so far)
    for key, row in rows.items():
        if row.state == "firing" and key not in wanted:
            row.state, row.resolved_at, row.attempts, row.next_attempt_at = "resolved", now, 0, 0.0
            resolved += 1
    return fired, resolved

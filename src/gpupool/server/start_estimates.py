"""Start-time estimates in the server: what the plan needs (expected run times), and where the
plan is kept (``start_estimates``, docs/fair-share-and-estimates.md).

The leader plans every ``estimate_interval_s`` (``SchedulerLoop.estimate_starts``): it reads
the snapshot the cycle reads, the usage history and the team's ended jobs (read phase), runs
``scheduler.estimates.plan_starts`` within ``estimate_budget_s`` (no transaction open), then
replaces the table under its fence. The table, not the leader's memory: API workers in other
processes read it, and after a fail-over the last plan stays readable (with its time) until
the new leader's first one replaces it.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gpupool.scheduler.estimates import Plan
from gpupool.scheduler.runtime_model import Ended, Expected, RuntimeHistory
from gpupool.scheduler.types import RunningJob
from gpupool.server.db.tables import JobRow, StartEstimateRow

HISTORY_JOBS = 5000  # the latest ended jobs the run-time model learns from
ENDED = ("succeeded", "failed")
CHUNK = 500


@dataclass(frozen=True, slots=True)
class _Facts:
    tenant: str
    user: str
    name: str
    request: str
    limit_s: float | None


def _name(name: str, command: Sequence[str] | None) -> str:
    return name or " ".join(command or [])[:200]


def _facts(session: Session, ids: Iterable[int]) -> dict[int, _Facts]:
    jobs = JobRow.__table__.c
    wanted = list(ids)
    out: dict[int, _Facts] = {}
    for i in range(0, len(wanted), CHUNK):
        rows = session.execute(
            select(
                jobs.id,
                jobs.tenant,
                jobs.submitted_by,
                jobs.name,
                jobs.command,
                jobs.request,
                jobs.max_runtime_s,
            ).where(jobs.id.in_(wanted[i : i + CHUNK]))
        )
        for r in rows:
            out[r.id] = _Facts(
                r.tenant,
                r.submitted_by,
                _name(r.name, r.command),
                r.request,
                None if r.max_runtime_s is None else float(r.max_runtime_s),
            )
    return out


def runtime_history(session: Session) -> RuntimeHistory:
    """The latest ``HISTORY_JOBS`` ended jobs, oldest first (the model keeps the last 20 of
    each similarity key)."""
    jobs = JobRow.__table__.c
    rows = session.execute(
        select(
            jobs.tenant,
            jobs.submitted_by,
            jobs.name,
            jobs.command,
            jobs.request,
            jobs.started_at,
            jobs.finished_at,
            jobs.max_runtime_s,
        )
        .where(jobs.state.in_(ENDED), jobs.started_at.is_not(None), jobs.finished_at.is_not(None))
        .order_by(jobs.finished_at.desc())
        .limit(HISTORY_JOBS)
    ).all()
    return RuntimeHistory(
        ended=(
            Ended(
                r.tenant,
                r.submitted_by,
                _name(r.name, r.command),
                r.request,
                max(0.0, r.finished_at - r.started_at),
                r.max_runtime_s,
            )
            for r in reversed(rows)
        )
    )


def expected_runs(
    session: Session, running: Sequence[RunningJob], pending_ids: Iterable[str], now: float
) -> dict[str, Expected]:
    """Every live and pending job's expected run time (``runtime_model``), by job id."""
    history = runtime_history(session)
    started = {int(r.job.id): r.start_time for r in running}
    ids = set(started) | {int(j) for j in pending_ids}
    out: dict[str, Expected] = {}
    for job_id, f in _facts(session, ids).items():
        ran = now - started[job_id] if job_id in started else 0.0
        out[str(job_id)] = history.expect(
            f.tenant, f.user, f.name, f.request, f.limit_s, ran_s=max(0.0, ran)
        )
    return out


def store(session: Session, plan: Plan, now: float) -> int:
    """Replace the table with ``plan``'s estimates of jobs still pending; how many."""
    session.execute(delete(StartEstimateRow))
    ids = [int(j) for j in plan.estimates]
    jobs = JobRow.__table__.c
    rows = []
    for i in range(0, len(ids), CHUNK):
        pending = session.execute(
            select(jobs.id).where(jobs.id.in_(ids[i : i + CHUNK]), jobs.state == "pending")
        ).scalars()
        for job_id in pending:
            e = plan.estimates[str(job_id)]
            rows.append(
                {
                    "job_id": job_id,
                    "start": e.start,
                    "nodes": list(e.nodes),
                    "basis": e.basis,
                    "computed_at": now,
                }
            )
    if rows:
        session.execute(StartEstimateRow.__table__.insert(), rows)
    return len(rows)


def estimates_of(session: Session, job_ids: Sequence[int]) -> Mapping[int, StartEstimateRow]:
    """The stored estimates of these jobs (those the last plan made)."""
    out: dict[int, StartEstimateRow] = {}
    for i in range(0, len(job_ids), CHUNK):
        for row in session.execute(
            select(StartEstimateRow).where(StartEstimateRow.job_id.in_(job_ids[i : i + CHUNK]))
        ).scalars():
            out[row.job_id] = row
    return out

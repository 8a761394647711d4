"""Which pending jobs the scheduler may consider at all, as Slurm's job control decides before
its scheduler looks: a held job waits for ``release``; a job with a begin time waits until
then (``--begin``); a job with dependencies waits until they are met (``afterok``,
``afterany``, ``afternotok``; ``singleton``: no other job of its name and user running, and
none of them pending with a lower id — Slurm's rule); the tasks of an array with a limit
(``--array 0-99%10``) hold devices at most ``limit`` at a time. Pure: the caller reads the
states from the state of record.
"""

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

FINISHED_OK = frozenset({"succeeded"})
FINISHED_NOT_OK = frozenset({"failed", "cancelled"})
FINISHED = FINISHED_OK | FINISHED_NOT_OK
HOLDING = frozenset({"admitted", "running"})


@dataclass(frozen=True)
class Gated:
    """The job-control fields of one pending job."""

    id: int
    held: bool = False
    dependency: tuple[tuple[str, int], ...] = ()  # (type, job id)
    array_job: int | None = None
    array_index: int | None = None
    array_limit: int | None = None
    begin_at: float | None = None  # sbatch --begin: not before then
    singleton: tuple[str, str] | None = None  # --dependency=singleton: (user, name)


Singles = Mapping[tuple[str, str], Sequence[tuple[int, str]]]  # (user, name) -> (id, state)


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def singleton_reason(job: int, key: tuple[str, str], live: Sequence[tuple[int, str]]) -> str | None:
    """Why a singleton job must wait: another job of its user and name runs (or is admitted),
    or one is pending with a lower id (it goes first); None when none is."""
    user, name = key
    same = f"of the same name ({name}) and user ({user})"
    for other, state in sorted(live):
        if other != job and state in HOLDING:
            return f"singleton: job {other} {same} is {state}"
    for other, state in sorted(live):
        if other < job and state == "pending":
            return f"singleton: job {other} {same} is pending ahead of it"
    return None


def _condition(kind: str, job: int, states: Sequence[str]) -> tuple[bool, str | None]:
    """(met, why it can never be met) for one condition on a job (or a whole array: the
    states of every task). A job that no longer exists counts as met, as Slurm's does."""
    if not states:
        return True, None
    if not all(s in FINISHED for s in states):
        return False, None
    ok = all(s in FINISHED_OK for s in states)
    if kind == "afterany":
        return True, None
    if kind == "afterok":
        if ok:
            return True, None
        bad = next(s for s in states if s not in FINISHED_OK)
        return False, f"afterok:{job} but job {job} {'has a task ' if len(states) > 1 else ''}{bad}"
    if any(s in FINISHED_NOT_OK for s in states):  # afternotok
        return True, None
    return False, f"afternotok:{job} but job {job} succeeded"


def dependency_status(
    dependency: Iterable[tuple[str, int]], states: Mapping[int, Sequence[str]]
) -> tuple[bool, bool]:
    """(every condition met, one can never be met): what ``dependency_reason`` says, typed
    (the CLI's Slurm formats print Dependency or DependencyNeverSatisfied by it)."""
    met = [_condition(kind, job, states.get(job, ())) for kind, job in dependency]
    return all(ok for ok, _ in met), any(never is not None for _, never in met)


def dependency_reason(
    dependency: Iterable[tuple[str, int]], states: Mapping[int, Sequence[str]]
) -> str | None:
    """Why a job must still wait for its dependencies, or None when all are met."""
    waiting: list[str] = []
    for kind, job in dependency:
        met, never = _condition(kind, job, states.get(job, ()))
        if never is not None:
            return f"dependency can never be satisfied: {never} (cancel this job)"
        if not met:
            now = states.get(job, ())
            what = now[0] if len(now) == 1 else f"{sum(s in FINISHED for s in now)}/{len(now)} done"
            waiting.append(f"{kind}:{job} (job {job} {what})")
    return f"waiting for dependency: {', '.join(waiting)}" if waiting else None


def gate(
    jobs: Iterable[Gated],
    states: Mapping[int, Sequence[str]],
    holding: Mapping[int, int],
    now: float | None = None,
    singles: Singles | None = None,
) -> dict[int, str]:
    """The pending jobs that must not be scheduled now, each with its reason.

    ``states``: for each job named in a dependency, the states of the job (or of every task
    when it names an array); ``holding``: how many tasks of each array hold devices now;
    ``singles``: for each (user, name) of a singleton job, the ids and states of that user's
    live jobs of that name."""
    now = time.time() if now is None else now
    out: dict[int, str] = {}
    throttled: dict[int, list[Gated]] = {}
    for job in jobs:
        if job.held:
            out[job.id] = f"held (gpupool job release {job.id})"
            continue
        if job.begin_at is not None and now < job.begin_at:
            out[job.id] = f"begin time: not before {_iso(job.begin_at)} (sbatch --begin)"
            continue
        reason = dependency_reason(job.dependency, states)
        if reason is None and job.singleton is not None:
            live = (singles or {}).get(job.singleton, ())
            reason = singleton_reason(job.id, job.singleton, live)
        if reason is not None:
            out[job.id] = reason
        elif job.array_job is not None and job.array_limit is not None:
            throttled.setdefault(job.array_job, []).append(job)
    for array, tasks in throttled.items():
        limit = tasks[0].array_limit or 0
        room = max(0, limit - holding.get(array, 0))
        tasks.sort(key=lambda t: (t.array_index or 0, t.id))
        for task in tasks[room:]:
            out[task.id] = f"array limit: {limit} tasks of array {array} at a time (%{limit})"
    return out

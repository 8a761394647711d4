"""Which pending jobs the scheduler may consider at all, as Slurm's job control decides before
its scheduler looks: a held job waits for ``release``; a job with dependencies waits until
they are met (``afterok``, ``afterany``, ``afternotok``); the tasks of an array with a limit
(``--array 0-99%10``) hold devices at most ``limit`` at a time. Pure: the caller reads the
states from the state of record.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

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
) -> dict[int, str]:
    """The pending jobs that must not be scheduled now, each with its reason.

    ``states``: for each job named in a dependency, the states of the job (or of every task
    when it names an array); ``holding``: how many tasks of each array hold devices now."""
    out: dict[int, str] = {}
    throttled: dict[int, list[Gated]] = {}
    for job in jobs:
        if job.held:
            out[job.id] = f"held (gpupool job release {job.id})"
            continue
        reason = dependency_reason(job.dependency, states)
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

"""Advisory mode's pure part: which kind of action each cycle decision is, and taking held
decisions out of a cycle's result (a job's binding with the preemptions and moves of its
victims). The server gates them on proposals (``gpupool.server.advisory``); the simulator on
an approval delay (``gpupool.sim.advisory_sim``)."""

from collections.abc import Iterator

from gpupool.scheduler.reasons import Reason, Wait
from gpupool.scheduler.session import Binding, CycleResult

JOB_ACTIONS = ("bind", "preempt", "reclaim", "defragment")  # what a cycle decides for a job
ACTIONS = (*JOB_ACTIONS, "mode-switch", "scale-in")
KIND = {"allocate": "bind", "borrow": "bind", "backfill": "bind", "preempt": "preempt",
        "reclaim": "reclaim", "defragment": "defragment"}  # fmt: skip


def decisions(result: CycleResult) -> Iterator[tuple[Binding, str]]:
    """Each binding of the cycle with its action kind."""
    for b in list(result.bindings):
        yield b, KIND.get(b.action, "bind")


def withhold(result: CycleResult, held: dict[str, str]) -> None:
    """Take the ``held`` jobs' decisions out of ``result`` (in place): their bindings, the
    preemptions of their victims and the victims' own re-bindings (moves); the held jobs
    stay pending with the given reasons."""
    if not held:
        return
    victims = {v for b in result.bindings if b.job_id in held for v in b.after}
    result.bindings = [
        b for b in result.bindings if b.job_id not in held and b.job_id not in victims
    ]
    result.preemptions = [p for p in result.preemptions if p.job_id not in victims]
    result.pending.update((job, Reason(Wait.APPROVAL, why)) for job, why in held.items())

"""The plugin protocol the actions call, as Volcano's session functions: the order of the
queue, the quota check, whether a running job may give way to another (per action), and
where a job goes (the placer's policy: node order). ``default_plugins`` is gpupool's own
behaviour; a new policy is one file that builds ``Plugins`` with its function in place of the
default one (``dataclasses.replace(default_plugins(...), preemptable=mine)``)."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpupool.model import Job, ResourceRequest
from gpupool.scheduler.placer import Placer
from gpupool.scheduler.priorities import QueuePolicy
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.tenants import TenantTree, Usage
from gpupool.scheduler.types import PlacementResult, RunningJob

JobOrder = Callable[[list[Job], float], list[Job]]
QuotaCheck = Callable[[str, Usage, bool], tuple[bool, bool, str]]  # -> ok, borrows, reason
Preemptable = Callable[[RunningJob, Job, str], bool]  # victim, for whom, which action
Place = Callable[
    [ClusterState, Job, np.ndarray | None, str, bool, Sequence[ResourceRequest]], PlacementResult
]


@dataclass(frozen=True)
class Plugins:
    job_order: JobOrder
    quota: QuotaCheck
    preemptable: Preemptable
    place: Place


def default_plugins(
    queue: QueuePolicy,
    tree: TenantTree,
    placer: Placer,
    factors: Mapping[str, float] | None = None,
) -> Plugins:
    """``factors``: each tenant's fair-share factor, when the cycle has a usage history (the
    queue orders jobs within a class by it)."""

    def job_order(jobs: list[Job], now: float) -> list[Job]:
        return queue.order(jobs, now, factors)

    def quota(tenant: str, usage: Usage, allow_borrow: bool = True) -> tuple[bool, bool, str]:
        return tree.check(tenant, usage, allow_borrow=allow_borrow)

    def preemptable(victim: RunningJob, job: Job, action: str) -> bool:
        """preempt: a lower-priority job of the same tenant; reclaim: another tenant's job
        running on borrowed capacity; defragment: a job that may be suspended and is no
        inference replica; replace (defragment, make-before-break): an inference replica that
        allows moving — a copy starts elsewhere and it stops once the copy runs."""
        if action == "preempt":
            return queue.base_priority(victim.job) < queue.base_priority(job)
        if action == "reclaim":
            return victim.borrowed and victim.job.tenant != job.tenant
        inference = victim.job.kind.value == "inference"
        if action == "defragment":
            return victim.job.on_preempt == "suspend" and not inference
        if action == "replace":
            return victim.job.on_preempt == "suspend" and inference
        raise ValueError(f"no rule says who may be stopped for {action!r}")

    def place(
        state: ClusterState,
        job: Job,
        mask: np.ndarray | None,
        reason: str,
        explain: bool,
        upcoming: Sequence[ResourceRequest] = (),
    ) -> PlacementResult:
        return placer.place(state, job, mask, reason, explain=explain, upcoming=upcoming)

    return Plugins(job_order if factors else queue.order, quota, preemptable, place)

"""One scheduling cycle: a short list of actions over a session, as Volcano does.

park and wake (a service's replicas: cards lent or taken back) -> move replicas (copies of
online work off a reservation whose window began, make-before-break) -> enqueue -> allocate
(within guarantee) -> borrow (idle capacity, DRF between borrowers)
-> preempt (lower priority, same tenant) -> reclaim (owners take back lent capacity)
-> defragment (room on one node for a guarantee) -> backfill (jobs that end before the
starving head job can start) -> reserve (others' work leaves a reservation whose window
began). Each action is a module of ``scheduler/actions``; what they
ask of policy (queue order, quota, who may give way, where jobs go) is in ``plugins``.

``run_cycle`` is pure: (snapshot, running jobs, queue, tenants, now) -> decisions. It owns the
``ClusterState`` it is given (placements are applied to it) and touches nothing else.
"""

from collections.abc import Sequence

from gpupool.model import Job, SpecError
from gpupool.scheduler.actions.allocate import allocate
from gpupool.scheduler.actions.backfill import backfill
from gpupool.scheduler.actions.borrow import borrow
from gpupool.scheduler.actions.defragment import defragment
from gpupool.scheduler.actions.park import ParkAsk, park_and_wake
from gpupool.scheduler.actions.preempt import preempt
from gpupool.scheduler.actions.reclaim import reclaim
from gpupool.scheduler.actions.reserve import move_replicas, reserve
from gpupool.scheduler.fairshare import UsageHistory
from gpupool.scheduler.placer import Placer
from gpupool.scheduler.plugins import Plugins
from gpupool.scheduler.reasons import Reason, Wait
from gpupool.scheduler.reservations import Reservation
from gpupool.scheduler.session import (
    MIG_PERCENT,
    Binding,
    CycleConfig,
    CycleResult,
    Preemption,
    RunningJob,
    Session,
    estimate_usage,
)
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.tenants import TenantTree

__all__ = [
    "MIG_PERCENT",
    "Binding",
    "CycleConfig",
    "CycleResult",
    "Preemption",
    "RunningJob",
    "enqueue",
    "estimate_usage",
    "run_cycle",
]


def run_cycle(
    state: ClusterState,
    running: Sequence[RunningJob],
    pending: Sequence[Job],
    tenants: TenantTree,
    now: float,
    reservations: Sequence[Reservation] = (),
    config: CycleConfig | None = None,
    placer: Placer | None = None,
    plugins: Plugins | None = None,
    parks: Sequence[ParkAsk] = (),
    history: UsageHistory | None = None,
) -> CycleResult:
    """Decide one cycle. ``tenants`` must carry no usage yet: running jobs are charged here.
    ``plugins``: policy hooks other than gpupool's defaults (``scheduler/plugins.py``).
    ``history``: the tenants' decayed usage (fair share over time, ``scheduler/fairshare.py``);
    None: borrowers take turns by their present dominant share alone, as before it."""
    config = config or CycleConfig()
    placer = placer or Placer(config.policy)
    cy = Session(state, running, tenants, reservations, now, config, placer, plugins, history)
    park_and_wake(cy, parks)  # a service's replicas first: a wake is seconds from serving
    homeless = move_replicas(cy)  # copies off a reservation that began, before any binding
    queue = enqueue(cy, pending)
    placer.observe(queue, state)
    blocked, to_borrow, behind = allocate(cy, queue)
    blocked += borrow(cy, to_borrow)
    blocked = preempt(cy, blocked)
    blocked = reclaim(cy, blocked)
    defragment(cy, blocked)
    backfill(cy, behind)
    reserve(cy, homeless)
    return cy.result


def enqueue(cy: Session, pending: Sequence[Job]) -> list[Job]:
    """Validate and order the queue; invalid jobs stay pending with the reason."""
    valid: list[Job] = []
    for job in pending:
        try:
            cy.tree.require(job.tenant)
            cy.q.class_value(job)
        except SpecError as exc:
            cy.result.pending[job.id] = Reason(Wait.INVALID, str(exc))
            continue
        valid.append(job)
    return cy.plugins.job_order(valid, cy.now)

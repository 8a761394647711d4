"""What a reservation will do when it begins, as the state of record is now: the engine's
plan (``scheduler.reservation_plan``, pure) over a snapshot of the pool, with the services
the moved and stranded jobs are replicas of. Used by creation (the ``dry_run`` preview, the
refusal of a reservation that would leave a service without a place) and by the list (what
each reservation ahead will do, and its status in words)."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.scheduler.cycle import CycleConfig
from gpupool.scheduler.placer import Placer
from gpupool.scheduler.reservation_plan import ReservationPlan, plan_reservation
from gpupool.scheduler.reservations import Reservation, iso
from gpupool.server.db.tables import ServiceReplicaRow, ServiceRow
from gpupool.server.reservation_schemas import (
    PlannedJob,
    PlannedMove,
    PlannedStrand,
    ReservationPlanOut,
)
from gpupool.server.settings import Settings
from gpupool.server.snapshot import CycleInputs, SnapshotBuilder, tenant_tree


@dataclass
class Preview:
    """One snapshot of the pool, for the plans of one or more reservations."""

    session: Session
    settings: Settings
    inputs: CycleInputs
    services: dict[str, tuple[str, str]]  # replica job id -> (service, its tenant)

    @classmethod
    def read(cls, s: Session, settings: Settings) -> "Preview":
        inputs = SnapshotBuilder(settings.agent_lag_max_s).build(s)
        services = {
            str(job): (name, tenant)
            for job, name, tenant in s.execute(
                select(ServiceReplicaRow.job_id, ServiceRow.name, ServiceRow.tenant).join(
                    ServiceRow, ServiceRow.id == ServiceReplicaRow.service_id
                )
            )
        }
        return cls(s, settings, inputs, services)

    def plan(
        self, new: Reservation, reservations: Sequence[Reservation], now: float
    ) -> ReservationPlan:
        """The engine's plan for ``new`` among ``reservations`` (``new`` left out of them)."""
        config = CycleConfig(policy=self.settings.policy, queue=self.inputs.queue,
                             grace_s=self.settings.grace_s)  # fmt: skip
        return plan_reservation(
            self.inputs.state,
            self.inputs.running,
            lambda: tenant_tree(self.session),
            [r for r in reservations if r.id != new.id],
            new,
            now,
            config,
            Placer(self.settings.policy),
        )

    def out(
        self, plan: ReservationPlan, new: Reservation, sees: Callable[[str], bool]
    ) -> ReservationPlanOut:
        """``new``'s plan as the API gives it, jobs of tenants the reader may not see left
        out."""
        tenant = {r.job.id: r.job.tenant for r in self.inputs.running}
        hidden: set[str] = set()

        def shown(job_id: str) -> bool:
            if sees(tenant.get(job_id, "")):
                return True
            hidden.add(job_id)
            return False

        def service(job_id: str) -> str | None:
            found = self.services.get(job_id)
            return found[0] if found else None

        out = ReservationPlanOut(
            stops=[
                PlannedJob(job_id=int(j), tenant=tenant[j], service=service(j))
                for j in plan.stops
                if shown(j)
            ],
            moves=[
                PlannedMove(
                    job_id=int(m.job_id),
                    tenant=tenant[m.job_id],
                    service=service(m.job_id),
                    to=list(m.to),
                )
                for m in plan.moves
                if shown(m.job_id)
            ],
            stranded=[
                PlannedStrand(
                    job_id=int(x.job_id),
                    tenant=tenant[x.job_id],
                    service=service(x.job_id),
                    at=x.at,
                    by=x.by,
                    own=x.by == new.id,
                    why=x.why,
                )
                for x in plan.stranded
                if shown(x.job_id)
            ],
        )
        out.hidden = len(hidden)
        return out


def outage(plan: ReservationPlanOut, reservations: Sequence[Reservation], new: Reservation) -> str:
    """Why ``new`` is refused, naming each service it leaves without a place, and when;
    empty when it leaves none. (Online jobs of no service it strands are in its plan: a
    service is what must not go down on a timetable.)"""
    owner = {r.id: r.tenant for r in reservations}
    groups: dict[tuple[str, str], list[PlannedStrand]] = {}
    for x in plan.stranded:
        if x.service is not None:
            groups.setdefault((x.service, x.tenant), []).append(x)
    said = []
    for (service, tenant), jobs in groups.items():
        ids = ", ".join(str(x.job_id) for x in sorted(jobs, key=lambda x: x.job_id))
        first = min(jobs, key=lambda x: x.at)
        when = (
            "when it begins"
            if first.own
            else f"when reservation {first.by} of {owner.get(first.by, '?')} begins"
        )
        said.append(
            f"it would leave service {service} of {tenant} without a place: replica job(s) "
            f"{ids} stopped at {iso(first.at)} {when}, with no room elsewhere for a copy"
        )
    if not said:
        return ""
    return "; ".join(said) + "; allow_outage (--allow-outage) stops them anyway"


def status(r: Reservation, plan: ReservationPlanOut | None, now: float) -> str:
    """The reservation in words: on, or ahead with what it keeps off its nodes meanwhile and
    what it will do when it begins."""
    if r.start <= now:
        return f"on until {iso(r.end)}: its nodes are {r.tenant}'s alone"
    words = [
        f"ahead, from {iso(r.start)}: until then others' work may use its nodes (online work "
        "only when no other node has room) and leaves them when it begins"
    ]
    if plan is not None:
        done = []
        if plan.stops:
            done.append(f"stops {len(plan.stops)} job(s)")
        if plan.moves:
            done.append(f"moves {len(plan.moves)} (a copy elsewhere first)")
        if done:
            words.append("when it begins it " + " and ".join(done))
        left = sorted({x.service or f"job {x.job_id}" for x in plan.stranded})
        if left:
            words.append(f"it leaves {', '.join(left)} without a place")
        if plan.hidden:
            words.append(f"{plan.hidden} job(s) of teams you do not see")
    return "; ".join(words)

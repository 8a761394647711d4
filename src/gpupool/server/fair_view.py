"""Fair share as people read it (sshare, sprio): computed by an API worker from what the
leader's cycle is given — the tenants, the decayed usage history and present borrowing — so
the factors shown are the cycle's (docs/fair-share-and-estimates.md).

While fair share over time is off (``fairshare_half_life_h`` 0) the same view is computed
with Slurm's default half-life (``SHOWN_HALF_LIFE_H``) and says it is not in force."""

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.scheduler.cycle import MIG_PERCENT
from gpupool.scheduler.fairshare import HOUR, FairShare, present_borrowing
from gpupool.scheduler.priorities import QueuePolicy
from gpupool.server.db.tables import AllocationRow, JobRow
from gpupool.server.fair_usage import read_history
from gpupool.server.settings import Settings
from gpupool.server.snapshot import queue_policy, tenant_tree

SHOWN_HALF_LIFE_H = 168.0  # Slurm's PriorityDecayHalfLife default (7 days)


@dataclass(frozen=True, slots=True)
class FairShareNow:
    fairshare: FairShare
    half_life_h: float
    active: bool  # whether the cycle orders by it (fairshare_half_life_h > 0)


def _card_percent(placement: dict) -> int:
    """A live allocation's cards in percent of a card (a MIG slice its fraction)."""
    pct = 0
    for node in placement.get("nodes", []):
        for d in node.get("devices", []):
            mig = d.get("mig_profile")
            pct += MIG_PERCENT.get(mig, 0) if mig else int(d.get("compute_pct", 0))
    return pct


def fair_share_now(session: Session, settings: Settings, now: float) -> FairShareNow:
    active = settings.fairshare_half_life_h > 0
    half_life_h = settings.fairshare_half_life_h if active else SHOWN_HALF_LIFE_H
    tree = tenant_tree(session, now)
    allocs = AllocationRow.__table__.c
    for tenant, placement in session.execute(
        select(allocs.tenant, allocs.placement).where(allocs.state == "active")
    ):
        if tenant in tree.tenants:
            tree.charge(tenant, {"gpu": _card_percent(placement)})
    history = read_history(session, now, half_life_h * HOUR)
    return FairShareNow(FairShare(tree, history, present_borrowing(tree)), half_life_h, active)


@dataclass(frozen=True, slots=True)
class PriorityParts:
    """One pending job's priority as sprio splits it (the cycle's ``QueuePolicy.effective``)."""

    job_id: int
    tenant: str
    user: str
    priority_class: str
    priority: float  # the sum
    qos: int  # its class's value x 1000
    nice: int  # minus its own priority (Slurm's nice lowers priority)
    age: float  # aging points
    fairshare: float  # fairshare_weight x its tenant's factor (0 while fair share is off)


def priority_parts(
    session: Session, settings: Settings, now: float, fs: FairShareNow, jobs: Sequence[JobRow]
) -> list[PriorityParts]:
    q: QueuePolicy = queue_policy(session)
    factors = fs.fairshare.factors() if fs.active else {}
    out = []
    for j in jobs:
        waited = max(0.0, now - j.submit_time)
        age = (waited // q.aging_s) * q.aging_step * 1000 if q.aging_s > 0 else 0.0
        qos = q.classes.get(j.priority_class, 0) * 1000
        share = settings.fairshare_weight * factors.get(j.tenant, 0.0)
        out.append(
            PriorityParts(j.id, j.tenant, j.submitted_by, j.priority_class,
                          qos + j.priority + age + share, qos, -j.priority, age, share)
        )  # fmt: skip
    return out

"""Which alerts fire now (pure: facts in, alerts out). Each alert has a key that stays the same
while the condition lasts, so it is stored once and resolved when the condition goes away."""

from dataclasses import dataclass, field
from operator import attrgetter

from gpupool.billing.money import yuan
from gpupool.scheduler.reasons import Wait

KINDS = (
    "node-lost",
    "device-unhealthy",
    "device-hot",
    "card-idle",
    "job-pending",
    "quota-exhausted",
    "budget",
)


@dataclass(frozen=True)
class DeviceFact:
    node: str
    index: int
    healthy: bool
    temp_c: float | None = None
    util_pct: float | None = None
    held_by: str | None = None  # the tenant holding it, if any
    held_since: float | None = None


@dataclass(frozen=True)
class PendingFact:
    job_id: int
    tenant: str
    queued_at: float
    reason: str
    held: bool = False
    code: str = ""  # the Wait code the last cycle gave it ("" before one judged it)


@dataclass(frozen=True)
class BudgetFact:
    tenant: str
    month: str
    spent_fen: int
    budget_fen: int
    thresholds: tuple[int, ...]
    action: str = "notify"  # or stop-elastic: no work beyond its guarantee at 100%

    @property
    def exhausted(self) -> bool:
        return self.budget_fen > 0 and self.spent_fen >= self.budget_fen

    def crossed(self) -> tuple[int, ...]:
        """The thresholds (percent) its spend has reached."""
        if self.budget_fen <= 0:
            return ()
        return tuple(
            t for t in sorted(self.thresholds) if 100 * self.spent_fen >= t * self.budget_fen
        )


@dataclass(frozen=True)
class Limits:
    pending_minutes: float = 30.0
    temp_c: float = 85.0
    idle_minutes: float = 10.0
    idle_util_pct: float = 5.0


@dataclass(frozen=True)
class Facts:
    now: float
    lost_nodes: tuple[str, ...] = ()
    devices: tuple[DeviceFact, ...] = ()
    pending: tuple[PendingFact, ...] = ()
    budgets: tuple[BudgetFact, ...] = ()
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Firing:
    key: str
    kind: str
    tenant: str | None
    subject: str
    message: str


def firing(f: Facts) -> list[Firing]:
    """Every alert the facts raise, in a stable order."""
    out: list[Firing] = []
    lim = f.limits
    for node in sorted(f.lost_nodes):
        out.append(
            Firing(
                f"node-lost:{node}",
                "node-lost",
                None,
                node,
                f"node {node} is lost: its agent stopped heartbeating",
            )
        )
    lost = set(f.lost_nodes)
    idle_s = lim.idle_minutes * 60
    for d in sorted(f.devices, key=attrgetter("node", "index")):  # 20,000 at 5,000 nodes
        if d.node in lost:
            continue
        where = f"{d.node} device {d.index}"
        if not d.healthy:
            out.append(
                Firing(
                    f"device-unhealthy:{d.node}:{d.index}",
                    "device-unhealthy",
                    None,
                    where,
                    f"{where} reports unhealthy (no new work on it)",
                )
            )
        if d.temp_c is not None and d.temp_c >= lim.temp_c:
            out.append(
                Firing(
                    f"device-hot:{d.node}:{d.index}",
                    "device-hot",
                    None,
                    where,
                    f"{where} at {d.temp_c:.0f} °C (limit {lim.temp_c:.0f} °C)",
                )
            )
        if (
            d.held_by is not None
            and d.util_pct is not None
            and d.util_pct < lim.idle_util_pct
            and d.held_since is not None
            and f.now - d.held_since >= idle_s
        ):
            out.append(
                Firing(
                    f"card-idle:{d.node}:{d.index}",
                    "card-idle",
                    d.held_by,
                    where,
                    f"{where} is held by {d.held_by} at {d.util_pct:.0f}% utilisation",
                )
            )
    waiting_quota: dict[str, list[PendingFact]] = {}
    for p in sorted(f.pending, key=lambda p: p.job_id):
        if p.held:
            continue
        waited = f.now - p.queued_at
        if waited >= lim.pending_minutes * 60:
            out.append(
                Firing(
                    f"job-pending:{p.job_id}",
                    "job-pending",
                    p.tenant,
                    f"job {p.job_id}",
                    f"job {p.job_id} of {p.tenant} has waited {waited / 60:.0f} min: {p.reason}",
                )
            )
        if p.code == Wait.QUOTA:
            waiting_quota.setdefault(p.tenant, []).append(p)
    for tenant, jobs in sorted(waiting_quota.items()):
        out.append(
            Firing(
                f"quota-exhausted:{tenant}",
                "quota-exhausted",
                tenant,
                tenant,
                f"{len(jobs)} job(s) of {tenant} wait for quota: {jobs[0].reason}",
            )
        )
    for b in sorted(f.budgets, key=lambda b: b.tenant):
        if b.budget_fen <= 0:
            continue
        used = 100 * b.spent_fen / b.budget_fen
        for pct in b.crossed():
            out.append(
                Firing(
                    f"budget:{b.tenant}:{b.month}:{pct}",
                    "budget",
                    b.tenant,
                    b.tenant,
                    f"{b.tenant} has spent {yuan(b.spent_fen)} of its {yuan(b.budget_fen)} "
                    f"budget for {b.month} ({used:.0f}%, threshold {pct}%)",
                )
            )
    return out

"""Tenants and quotas: guaranteed (nominal) capacity, borrowing and lending limits.

Vocabulary follows Kueue's ClusterQueue/cohort: every tenant may hold a ``Quota`` per
resource — ``nominal`` is guaranteed, ``borrowing_limit`` caps how far above nominal it may go on
capacity others leave idle, ``lending_limit`` caps how much of its idle nominal others may
borrow. All tenants under one root form a cohort that borrows from one another. A quota on an
inner tenant (organisation, team) caps the usage of its whole subtree at nominal + borrowing.

Resources: ``gpu`` (any card), ``gpu:MODEL`` (cards of one model), ``gpu_mem`` (MiB of device
memory), ``cpu`` (millicores). Card resources count percent of a card (100 = one whole card, a
50% share = 50, a 3g MIG instance on a 7-slice GPU = 43), so whole cards, shares and MIG draw on
one quota; ``Quota.cards`` builds them from card counts.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpupool.model import SpecError
from gpupool.scheduler.types import Placement

Usage = dict[str, int]
CARD = 100


@dataclass(frozen=True, slots=True)
class Quota:
    nominal: int = 0
    borrowing_limit: int | None = None  # None: may borrow any idle capacity
    lending_limit: int | None = None  # None: all idle nominal may be lent

    def __post_init__(self) -> None:
        for name in ("nominal", "borrowing_limit", "lending_limit"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise SpecError(f"quota: {name} must not be negative", field=name)

    @staticmethod
    def cards(
        nominal: float, borrowing: float | None = None, lending: float | None = None
    ) -> "Quota":
        """A card-resource quota from card counts (fractions allowed)."""

        def pct(x: float | None) -> int | None:
            return None if x is None else round(x * CARD)

        return Quota(pct(nominal) or 0, pct(borrowing), pct(lending))


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    parent: str | None = None
    quotas: Mapping[str, Quota] = field(default_factory=dict)
    weight: float = 1.0  # fair-share weight when tenants borrow

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("tenant: name must not be empty", field="name")
        if self.weight <= 0:
            raise SpecError(f"tenant {self.name}: weight must be positive", field="weight")


def resource_label(resource: str) -> str:
    """``gpu:A100-80G`` reads as ``A100-80G`` in reasons."""
    return resource.split(":", 1)[1] if resource.startswith("gpu:") else resource


def fmt_amount(resource: str, amount: int) -> str:
    if resource.startswith("gpu") and resource != "gpu_mem":
        cards = amount / CARD
        return f"{cards:g}"
    return str(amount)


class TenantTree:
    """The tenant hierarchy with per-tenant usage; admission checks are pure arithmetic."""

    def __init__(self, tenants: Iterable[Tenant], closed: Mapping[str, str] | None = None):
        """``closed``: tenants that may borrow nothing now, each with why (a spent budget);
        their borrowing limits are taken as 0 and a job stopped by that says why."""
        self.closed: Mapping[str, str] = closed or {}
        self.tenants: dict[str, Tenant] = {}
        for t in tenants:
            if t.name in self.tenants:
                raise SpecError(f"tenant {t.name}: defined twice", field="name")
            self.tenants[t.name] = t
        for t in self.tenants.values():
            if t.parent is not None and t.parent not in self.tenants:
                raise SpecError(f"tenant {t.name}: unknown parent {t.parent!r}", field="parent")
        self.chain: dict[str, tuple[str, ...]] = {n: self._ancestry(n) for n in self.tenants}
        self.root = {n: c[-1] for n, c in self.chain.items()}
        self.usage: dict[str, Usage] = {n: {} for n in self.tenants}  # own jobs only
        # own + descendants, for managed resources
        self.subtree: dict[str, Usage] = {n: {} for n in self.tenants}
        self.resources = sorted({f for t in self.tenants.values() for f in t.quotas})
        self._managed = frozenset(self.resources)
        # per cohort (root) and resource: idle nominal its members lend, and what they borrow
        self.cohort_lend: dict[str, Usage] = {}
        self.cohort_borrowed: dict[str, Usage] = {}
        for n in self.tenants:
            lend = self.cohort_lend.setdefault(self.root[n], {})
            self.cohort_borrowed.setdefault(self.root[n], {})
            for f in self.tenants[n].quotas:
                lend[f] = lend.get(f, 0) + self.idle_lendable(n, f)

    def _ancestry(self, name: str) -> tuple[str, ...]:
        seen: list[str] = []
        current: str | None = name
        while current is not None:
            if current in seen:
                raise SpecError(f"tenant {name}: parent cycle through {current}", field="parent")
            seen.append(current)
            current = self.tenants[current].parent
        return tuple(seen)

    def require(self, name: str) -> None:
        if name not in self.tenants:
            raise SpecError(f"tenant: unknown tenant {name!r}", field="tenant")

    # -- accounting ------------------------------------------------------------------------
    def charge(self, tenant: str, usage: Usage, sign: int = 1) -> None:
        own = self.usage[tenant]
        lend = self.cohort_lend[self.root[tenant]]
        borrowed = self.cohort_borrowed[self.root[tenant]]
        for f, q in usage.items():
            if f not in self._managed:
                own[f] = own.get(f, 0) + sign * q
                continue
            lend_before, borrowed_before = self.idle_lendable(tenant, f), self.borrowed(tenant, f)
            own[f] = own.get(f, 0) + sign * q
            lend[f] = lend.get(f, 0) + self.idle_lendable(tenant, f) - lend_before
            borrowed[f] = borrowed.get(f, 0) + self.borrowed(tenant, f) - borrowed_before
        for name in self.chain[tenant]:  # subtree totals only matter where a quota exists
            sub = self.subtree[name]
            for f, q in usage.items():
                if f in self._managed:
                    sub[f] = sub.get(f, 0) + sign * q

    def nominal(self, tenant: str, resource: str) -> int:
        quota = self.tenants[tenant].quotas.get(resource)
        return quota.nominal if quota else 0

    def borrowed(self, tenant: str, resource: str) -> int:
        return max(0, self.usage[tenant].get(resource, 0) - self.nominal(tenant, resource))

    def idle_lendable(self, tenant: str, resource: str) -> int:
        """What ``tenant`` lends of ``resource`` right now (its unused nominal, capped)."""
        quota = self.tenants[tenant].quotas.get(resource)
        if quota is None:
            return 0
        unused = max(0, quota.nominal - self.usage[tenant].get(resource, 0))
        return unused if quota.lending_limit is None else min(unused, quota.lending_limit)

    def cohort_free(self, tenant: str, resource: str) -> int:
        """Idle lendable capacity in ``tenant``'s cohort not yet borrowed by anyone else."""
        root = self.root[tenant]
        lend = self.cohort_lend[root].get(resource, 0) - self.idle_lendable(tenant, resource)
        taken = self.cohort_borrowed[root].get(resource, 0)  # the asker's own included
        return max(0, lend - taken)

    def managed(self, resource: str) -> bool:
        return resource in self._managed

    # -- admission ---------------------------------------------------------------------------
    def check(
        self, tenant: str, usage: Usage, *, allow_borrow: bool = True
    ) -> tuple[bool, bool, str]:
        """Can ``tenant`` take ``usage`` more? Returns (ok, borrows, reason)."""
        borrows = False
        for f, q in usage.items():
            if q <= 0 or f not in self._managed:
                continue
            have = self.usage[tenant].get(f, 0)
            nominal = self.nominal(tenant, f)
            over = have + q - nominal
            if over > 0:
                quota = self.tenants[tenant].quotas.get(f, Quota())
                limit = quota.borrowing_limit
                head = (
                    f"quota: {tenant} {resource_label(f)} {fmt_amount(f, have)}/"
                    f"{fmt_amount(f, nominal)} guaranteed"
                )
                if not allow_borrow:
                    return False, True, head
                if tenant in self.closed:
                    return False, True, self.closed[tenant]
                if limit is not None and over > limit:
                    return False, True, f"{head}, borrowing limit {fmt_amount(f, limit)} reached"
                extra = over - self.borrowed(tenant, f)
                if extra > self.cohort_free(tenant, f):
                    return False, True, f"{head}, no idle capacity to borrow in the cohort"
                borrows = True
            for parent in self.chain[tenant][1:]:
                above = self.tenants[parent].quotas.get(f)
                if above is None:
                    continue
                cap = above.nominal + (above.borrowing_limit or 0)
                used = self.subtree[parent].get(f, 0)
                if used + q > cap:
                    return (
                        False,
                        borrows,
                        (
                            f"quota: {parent} {resource_label(f)} {fmt_amount(f, used)}/"
                            f"{fmt_amount(f, cap)} for its subtree"
                        ),
                    )
        return True, borrows, ""

    def ceiling(self, tenant: str, usage: Usage) -> str | None:
        """Why ``usage`` exceeds what ``tenant`` may ever hold at once (its nominal plus its
        borrowing limit, or an ancestor's cap for its subtree), or None. A quota without a
        borrowing limit has no ceiling of its own: idle capacity may always be borrowed."""
        for f, q in usage.items():
            if q <= 0 or f not in self._managed:
                continue
            for name in self.chain[tenant]:
                quota = self.tenants[name].quotas.get(f)
                if quota is None or (name == tenant and quota.borrowing_limit is None):
                    continue
                cap = quota.nominal + (quota.borrowing_limit or 0)
                if q > cap:
                    whose = name if name == tenant else f"{name} (for its subtree)"
                    return (
                        f"quota: asks {fmt_amount(f, q)} {resource_label(f)}, above what "
                        f"{whose} may ever hold: {fmt_amount(f, quota.nominal)} guaranteed + "
                        f"{fmt_amount(f, quota.borrowing_limit or 0)} borrowing limit"
                    )
        return None

    def dominant_share(self, tenant: str, capacity: Mapping[str, int]) -> float:
        """Weighted dominant-resource share of ``tenant`` (DRF), for fair borrowing."""
        share = 0.0
        for f, used in self.usage[tenant].items():
            total = capacity.get(f, 0)
            if total > 0:
                share = max(share, used / total)
        return share / self.tenants[tenant].weight


def usage_of(
    placement: Placement, mig_fraction: Mapping[str, int], models: Mapping[tuple[str, int], str]
) -> Usage:
    """Quota usage of a placement: card percent (total and per model), device memory, CPU.

    ``mig_fraction`` maps a MIG profile to its card percent; ``models`` maps (node, device) to
    the device model.
    """
    usage: Usage = {}

    def add(key: str, amount: int) -> None:
        usage[key] = usage.get(key, 0) + amount

    for ng in placement.nodes:
        add("cpu", ng.cpu_millis)
        for d in ng.devices:
            pct = mig_fraction[d.mig_profile] if d.mig_profile else d.compute_pct
            if not d.exclusive and not d.mig_profile and pct == 0:
                pct = 1  # a memory-only share still holds a place on the card
            add("gpu", pct)
            add(f"gpu:{models[(d.node, d.device)]}", pct)
            add("gpu_mem", d.mem_mib)
    return usage

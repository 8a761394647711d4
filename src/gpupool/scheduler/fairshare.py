"""Fair share over time (pure): decayed usage, Slurm's Fair Tree over it, and who borrows next.

The model is Slurm's *Fair Tree* (its default priority/multifactor algorithm since 19.05)
over usage counted as KAI's time-aware fairness counts it — only what a tenant took *beyond
its guarantee*:

- **Usage** ``U`` of a tenant is the card-hours of its jobs admitted as borrowed (the usage
  records the server meters, or the simulator's), each second aged by ``2^(-age/H)`` with the
  half-life ``H``: a record of ``c`` cards over ``[s, e]`` counts
  ``c * H/ln 2 * (2^(-(now-e)/H) - 2^(-(now-s)/H))`` card-hours (``decayed_card_hours``).
  What it borrows *now* counts as well, projected over one mean life ``tau = H/ln 2``: ``b``
  cards held now add ``b * tau`` card-hours (the decayed usage they add if held on). A
  subtree's usage is the sum of its members'.
- **Level fairness** of a tenant among its siblings is ``LevelFS = S / U'``: ``S = w / sum(w)``
  its normalised share (``w``: its weight), ``U' = U / sum(U)`` its normalised usage
  (infinite without usage). Siblings with higher LevelFS come first; the tree is walked
  depth first (a tenant's whole subtree before its next sibling), which ranks every tenant.
- **Fair-share factor** ``F = (n - r) / n`` for a tenant ranked after ``r`` of the ``n``
  tenants (ties share a rank): 1.0 for the first, ``1/n`` for the last; 1.0 for everyone
  while nobody has borrowed.
- **Who borrows next**: the borrower first in that order, usage counted as it stands when it
  borrows (a borrowed card raises its usage by ``tau`` card-hours at once, so a cycle does
  not give one tenant everything) — over time each tenant's borrowed card-hours tend to its
  weight's share (KAI's goal), not to what it happens to ask.
- **Order within a priority class**: ``QueuePolicy.fairshare_weight * F`` is added to a job's
  effective priority (Slurm's ``PriorityWeightFairshare``), below the gap between classes.

Why not KAI's formula for the factor: its adjusted over-quota weight ``W + k(W - U)`` is
normalised per level, and a product of per-level factors does not compare tenants of subtrees
of different depths; Fair Tree's rank does, and the share of borrowed capacity follows the
same order. Guarantees are never touched by any of it (KAI's rule too): usage within a
guarantee is not counted, and the allocate action admits it whatever the factors say.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpupool.scheduler.tenants import CARD, TenantTree

HOUR = 3600.0


def decay(value: float, age_s: float, half_life_s: float) -> float:
    """``value`` aged ``age_s`` seconds: halved every ``half_life_s`` (inf: never)."""
    if math.isinf(half_life_s):
        return value
    return value * math.pow(2.0, -max(0.0, age_s) / half_life_s)


def mean_life_h(half_life_s: float) -> float:
    """Hours a card held on from now adds to decayed usage in the long run (``H / ln 2``)."""
    return half_life_s / math.log(2) / HOUR


def decayed_card_hours(
    card_seconds: float, start: float, end: float, now: float, half_life_s: float
) -> float:
    """Card-hours of ``card_seconds`` spread evenly over ``[start, end]``, each second aged to
    ``now`` with ``half_life_s`` (the exact integral; a record ending in the future counts
    as if it ended now)."""
    end = min(end, now)
    start = min(start, end)
    if math.isinf(half_life_s):
        return card_seconds / HOUR
    if end <= start:
        return decay(card_seconds, now - end, half_life_s) / HOUR
    rate = card_seconds / (end - start)  # cards
    mean = half_life_s / math.log(2)
    newest = math.pow(2.0, -(now - end) / half_life_s)
    oldest = math.pow(2.0, -(now - start) / half_life_s)
    return rate * mean * (newest - oldest) / HOUR


@dataclass(frozen=True, slots=True)
class UsageHistory:
    """What the engine is given of the past (an input of the snapshot, never read by the
    engine from anywhere): per tenant, its own jobs' decayed card-hours as of the cycle's
    time — those admitted as borrowed (what fair share counts) and all of them (shown)."""

    half_life_s: float
    borrowed: Mapping[str, float] = field(default_factory=dict)
    used: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ShareRow:
    """One tenant as ``sshare`` shows it (Slurm's columns)."""

    tenant: str
    parent: str | None
    raw_shares: float  # its weight
    norm_shares: float  # its weight / its siblings' (itself included)
    raw_usage: float  # decayed borrowed card-hours of its subtree (present borrowing included)
    norm_usage: float  # its subtree's share of its siblings' usage (EffectvUsage)
    level_fs: float  # norm_shares / norm_usage (inf without usage)
    fairshare: float  # the factor: (n - tenants ranked before it) / n
    rank: int  # 1 for the first
    used: float  # all its own card-hours, decayed (history only)
    borrowing: float  # cards it borrows now


class FairShare:
    """The Fair Tree over one cycle's tenants, usage history and present borrowing."""

    def __init__(self, tree: TenantTree, history: UsageHistory, present: Mapping[str, float]):
        """``present``: cards each tenant borrows now (its own jobs)."""
        self.tree = tree
        self.history = history
        self.tau_h = mean_life_h(history.half_life_s)
        self.present = dict(present)
        self.children: dict[str | None, list[str]] = {}
        for name, t in tree.tenants.items():
            self.children.setdefault(t.parent, []).append(name)
        self.weight_sum = {
            p: sum(tree.tenants[c].weight for c in kids) for p, kids in self.children.items()
        }
        self.usage: dict[str, float] = {n: 0.0 for n in tree.tenants}  # subtree usage
        for name in tree.tenants:
            own = history.borrowed.get(name, 0.0) + self.present.get(name, 0.0) * self.tau_h
            for a in tree.chain[name]:
                self.usage[a] += own
        self.depth = max((len(c) for c in tree.chain.values()), default=0)
        self._factors: dict[str, float] | None = None

    def key(self, tenant: str, usage: Mapping[str, float] | None = None) -> tuple[float, ...]:
        """Where ``tenant`` stands in the tree's depth-first order (lower first): per level
        from the top, its ancestor's usage per weight — the inverse of LevelFS up to a
        factor its siblings share — padded with zeros to the tree's depth (a tenant's own
        jobs stand as a child of it that used nothing; a shallower leaf ties a deeper one
        whose levels below it used nothing)."""
        u = self.usage if usage is None else usage
        tenants = self.tree.tenants
        chain = self.tree.chain[tenant]
        key = tuple(u[a] / tenants[a].weight for a in reversed(chain))
        return key + (0.0,) * (self.depth - len(chain))

    def charge(self, usage: dict[str, float], tenant: str, cards: float) -> None:
        """``tenant`` borrows ``cards`` more now: its subtree usages grow by ``cards * tau``."""
        for a in self.tree.chain[tenant]:
            usage[a] += cards * self.tau_h

    def factors(self) -> dict[str, float]:
        """The fair-share factor of every tenant (1.0 while nobody has borrowed)."""
        if self._factors is None:
            keys = {n: self.key(n) for n in self.tree.tenants}
            ordered = sorted(keys.values())
            n = len(ordered)
            first: dict[tuple[float, ...], int] = {}
            for i, k in enumerate(ordered):
                first.setdefault(k, i)
            self._factors = {t: (n - first[k]) / n for t, k in keys.items()}
        return self._factors

    def rows(self) -> list[ShareRow]:
        """Every tenant, depth first in the tree's order (siblings by LevelFS)."""
        factors = self.factors()
        rank = {t: 1 + sum(1 for f in factors.values() if f > factors[t]) for t in factors}
        out: list[ShareRow] = []

        def walk(parent: str | None) -> None:
            kids = sorted(self.children.get(parent, []), key=lambda c: (self.key(c), c))
            total_u = sum(self.usage[c] for c in kids)
            for c in kids:
                t = self.tree.tenants[c]
                norm_s = t.weight / self.weight_sum[parent]
                norm_u = self.usage[c] / total_u if total_u > 0 else 0.0
                out.append(
                    ShareRow(
                        tenant=c,
                        parent=parent,
                        raw_shares=t.weight,
                        norm_shares=norm_s,
                        raw_usage=self.usage[c],
                        norm_usage=norm_u,
                        level_fs=norm_s / norm_u if norm_u > 0 else math.inf,
                        fairshare=factors[c],
                        rank=rank[c],
                        used=self.history.used.get(c, 0.0),
                        borrowing=self.present.get(c, 0.0),
                    )
                )
                walk(c)

        walk(None)
        return out


def present_borrowing(tree: TenantTree) -> dict[str, float]:
    """Cards each tenant borrows now (above its own guarantee), from a charged tree."""
    return {n: tree.borrowed(n, "gpu") / CARD for n in tree.tenants if tree.borrowed(n, "gpu")}

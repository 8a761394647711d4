"""Guarantees promised more than once, anywhere in the tenant tree. A guarantee is a promise
of reclaim — two of them on one card cannot both be kept — so setting one is answered with
what it overbooks (a warning, or a refusal with ``quota_overbooking = "refuse"``), and the
Teams page shows every level that is overbooked.

Every level is checked: the guarantees just under a tenant that has a guarantee of the
resource are summed against it, and those at the top of each branch against the pool. A
tenant without a guarantee of its own bounds nothing: its children's guarantees pass up to
the nearest ancestor that has one, or to the pool (in ``gpupool up``'s seed the teams sit
under ``company``, which has no quota: their guarantees are the pool's to keep). So each
level counts the *nearest* guarantees below it — a guaranteed tenant's own children are
counted at its level, not above it.

Pure: given the tree, the guarantees of one resource and the pool's capacity, in the
engine's units."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

OTHERS = "other teams"  # what a reader who may not see some members reads for them


@dataclass(frozen=True, slots=True)
class Overbooking:
    """One level whose guarantees exceed what is above them."""

    resource: str
    over: str | None  # the tenant whose guarantee they exceed; None: the pool
    limit: int  # its guarantee, or the pool's capacity
    members: tuple[tuple[str, int], ...]  # the nearest guarantees below it, by name

    @property
    def total(self) -> int:
        return sum(n for _, n in self.members)

    def words(self, shown: Callable[[int], str], sees: Callable[[str], bool] | None = None) -> str:
        """``gpu: guarantees a 3 cards + b 2 cards = 5 cards exceed org's guarantee of 4
        cards``; members the reader may not see (``sees``) are summed as "other teams"."""
        named = [(t, n) for t, n in self.members if sees is None or sees(t)]
        hidden = self.total - sum(n for _, n in named)
        parts = [f"{t} {shown(n)}" for t, n in named]
        if len(named) < len(self.members):
            parts.append(f"{OTHERS} {shown(hidden)}")
        if self.over is None:
            limit = f"the pool's {shown(self.limit)}"
        else:
            limit = f"{self.over}'s guarantee of {shown(self.limit)}"
        return (
            f"{self.resource}: guarantees {' + '.join(parts)} = {shown(self.total)} exceed {limit}"
        )


def _children(parents: Mapping[str, str | None]) -> dict[str | None, list[str]]:
    """Each tenant's children, and the top-level ones under None (a tenant whose parent is
    unknown counts as top-level)."""
    kids: dict[str | None, list[str]] = {}
    for tenant, parent in parents.items():
        kids.setdefault(parent if parent in parents else None, []).append(tenant)
    return kids


def _nearest(
    under: str | None, kids: Mapping[str | None, list[str]], nominal: Mapping[str, int]
) -> list[str]:
    """The guaranteed tenants nearest below ``under`` (None: the top), through tenants
    without a guarantee."""
    out, stack, seen = [], list(kids.get(under, ())), set()
    while stack:
        tenant = stack.pop()
        if tenant in seen:  # a tree has no cycle; a broken one must not hang the check
            continue
        seen.add(tenant)
        if tenant in nominal:
            out.append(tenant)
        else:
            stack.extend(kids.get(tenant, ()))
    return sorted(out)


def overbookings(
    resource: str, parents: Mapping[str, str | None], nominal: Mapping[str, int], capacity: int
) -> list[Overbooking]:
    """Every overbooked level of ``resource``: the pool's first, then tenants' by name.
    ``nominal``: every tenant's guarantee of it; ``capacity``: the pool's, in its units."""
    kids = _children(parents)
    out = []
    for over in (None, *sorted(t for t in nominal if t in parents)):
        members = _nearest(over, kids, nominal)
        limit = capacity if over is None else nominal[over]
        level = Overbooking(resource, over, limit, tuple((t, nominal[t]) for t in members))
        if members and level.total > limit:
            out.append(level)
    return out


def counted_in(
    tenant: str, parents: Mapping[str, str | None], nominal: Mapping[str, int]
) -> set[str | None]:
    """The levels ``tenant``'s guarantee takes part in — the one it is summed in (its
    nearest guaranteed ancestor, or the pool) and the one it bounds (its own): what setting
    it may overbook."""
    return {_ancestors(tenant, parents, nominal)[0], tenant}


def _ancestors(
    tenant: str, parents: Mapping[str, str | None], nominal: Mapping[str, int]
) -> list[str | None]:
    """The guaranteed ancestors of ``tenant``, nearest first, then None (the pool)."""
    out: list[str | None] = []
    above, seen = parents.get(tenant), {tenant}
    while above is not None and above in parents and above not in seen:
        seen.add(above)
        if above in nominal:
            out.append(above)
        above = parents.get(above)
    return [*out, None]


def overbooked(
    tenant: str,
    resource: str,
    parents: Mapping[str, str | None],
    nominal: Mapping[str, int],
    capacity: int,
    shown: Callable[[int], str],
    sees: Callable[[str], bool] | None = None,
) -> list[str]:
    """What the guarantees overbook at every level from the pool down to ``tenant``'s own
    (the pool's, its guaranteed ancestors' outermost first, its own), in words."""
    path = [*reversed(_ancestors(tenant, parents, nominal)), tenant]
    found = {o.over: o for o in overbookings(resource, parents, nominal, capacity)}
    return [found[level].words(shown, sees) for level in path if level in found]

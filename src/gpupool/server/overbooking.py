"""Guarantees promised more than once: the children of a tenant guaranteed more than it is,
or the top-level tenants more than the pool holds. A guarantee is a promise of reclaim — two
of them on one card cannot both be kept — so setting one is answered with what it overbooks
(a warning, or a refusal with ``quota_overbooking = "refuse"``). Pure: given the tree, the
guarantees of one resource and the pool's capacity, in the engine's units."""

from collections.abc import Callable, Mapping


def overbooked(
    tenant: str,
    resource: str,
    parents: Mapping[str, str | None],
    nominal: Mapping[str, int],
    capacity: int,
    shown: Callable[[int], str],
) -> list[str]:
    """What the guarantees of ``tenant``'s level and of its children overbook, in words.
    ``nominal``: every tenant's guarantee of ``resource``; ``shown``: a value in its units."""
    out = []

    def level(parent: str | None) -> list[str]:
        return sorted(t for t, p in parents.items() if p == parent and t in nominal)

    def over(members: list[str], limit: int, of: str) -> None:
        total = sum(nominal[t] for t in members)
        if total > limit:
            who = " + ".join(f"{t} {shown(nominal[t])}" for t in members)
            out.append(f"{resource}: guarantees {who} = {shown(total)} exceed {of}")

    parent = parents.get(tenant)
    if parent is None:
        over(level(None), capacity, f"the pool's {shown(capacity)}")
    elif parent in nominal:
        over(level(parent), nominal[parent], f"{parent}'s guarantee of {shown(nominal[parent])}")
    children = level(tenant)
    if children and tenant in nominal:
        over(children, nominal[tenant], f"{tenant}'s guarantee of {shown(nominal[tenant])}")
    return out

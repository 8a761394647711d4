"""Whether the pool's nodes can run service replicas, as their agents say
(``gpupool.io/replicas``: "yes", or "no: why" — a root agent without ``nft`` cannot publish a
replica's port into its tenant's walled namespace). A service no node can run is refused at
creation with the nodes' own words, instead of being accepted while every replica fails in a
backoff loop; one that some nodes cannot run is created with a warning naming them."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.model.labels import REPLICAS_LABEL
from gpupool.server.db.tables import NodeRow

NAMED = 5  # nodes named per reason; the rest counted
CANNOT_RUN_REPLICAS = f"its agent cannot run service replicas ({REPLICAS_LABEL}: no)"


def replicas_said(labels: dict | None) -> str:
    """What a node's agent says about running replicas ("yes" when it says nothing)."""
    return str((labels or {}).get(REPLICAS_LABEL) or "yes")


def cannot_run_replicas(labels: dict | None) -> bool:
    """Whether a node's agent says it cannot run a service replica."""
    return replicas_said(labels).startswith("no")


def _cannot(s: Session) -> tuple[int, dict[str, list[str]]]:
    """(agent nodes, {why: the nodes that say it}) of nodes that cannot run replicas."""
    nodes = 0
    why: dict[str, list[str]] = {}
    rows = select(NodeRow.name, NodeRow.labels).where(NodeRow.source == "agent")
    for name, labels in s.execute(rows.order_by(NodeRow.name)).all():
        nodes += 1
        said = replicas_said(labels)
        if cannot_run_replicas(labels):
            reason = said.removeprefix("no").lstrip(":").strip() or "its agent says no"
            why.setdefault(reason, []).append(name)
    return nodes, why


def _said(why: dict[str, list[str]]) -> str:
    parts = []
    for reason, names in why.items():
        more = len(names) - NAMED
        shown = ", ".join(names[:NAMED]) + (f", +{more}" if more > 0 else "")
        parts.append(f"{len(names)} node(s) ({shown}): {reason}")
    return "; ".join(parts)


def replica_places(s: Session) -> tuple[str | None, list[str]]:
    """(why no node can run a replica, or None; warnings when some cannot)."""
    nodes, why = _cannot(s)
    cannot = sum(len(names) for names in why.values())
    if not cannot:
        return None, []
    if cannot == nodes:
        return (
            f"no node of this pool can run a service replica: {_said(why)}; fix that on the "
            "nodes and restart their agents (docs/security.md)",
            [],
        )
    return None, [f"{cannot} of {nodes} nodes cannot run service replicas: {_said(why)}"]

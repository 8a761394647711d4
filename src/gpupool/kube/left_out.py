"""Nodes gpupool leaves out, and how it says so: a Warning Event on the Node and a log line,
once per change of reason (not every cycle), and a word in the reason of each pod that waits
for room while some node is left out.

Why a node is left out is a value (``LeftOut``: a cause and the message people read); the
message names what is wrong and what to set. ``changes`` is pure; the scheduler writes what
it returns.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gpupool.kube.events import event_body
from gpupool.model import SpecError

EVENT_REASON = "GpupoolNodeLeftOut"
MAX_NAMED = 3  # left-out nodes named in a waiting pod's reason; the rest are counted


class LeftOutCause(StrEnum):
    UNREADABLE = "unreadable"  # a label, annotation or quantity gpupool cannot read
    REPLICAS_AS_CARDS = "replicas-as-cards"  # time-slicing / MPS replicas under nvidia.com/gpu
    REPLICA_SIZE = "replica-size"  # another replica size than the cluster's
    MIG_UNLABELLED = "mig-unlabelled"  # advertises MIG instances, not labelled sharing=mig
    MIG_SINGLE = "mig-single"  # MIG's single strategy: instances under nvidia.com/gpu
    HAMI = "hami"  # HAMi's device plugin serves it (cards advertised x split count)


# what a waiting pod is told about a node left out for that cause (the Event says the rest)
SHORT: dict[LeftOutCause, str] = {
    LeftOutCause.UNREADABLE: "its object cannot be read",
    LeftOutCause.REPLICAS_AS_CARDS: "device-plugin replicas advertised as nvidia.com/gpu",
    LeftOutCause.REPLICA_SIZE: "another replica size than the cluster's",
    LeftOutCause.MIG_UNLABELLED: "advertises MIG instances but has no gpupool.io/sharing=mig label",
    LeftOutCause.MIG_SINGLE: "MIG instances advertised as nvidia.com/gpu (single strategy)",
    LeftOutCause.HAMI: "served by HAMi's device plugin",
}


class NodeLeftOut(SpecError):
    """A node gpupool will not place on, with its cause (``kube.inventory`` raises it)."""

    def __init__(self, message: str, cause: LeftOutCause, *, field: str | None = None):
        super().__init__(message, field=field)
        self.cause = cause


@dataclass(frozen=True, slots=True)
class LeftOut:
    node: str
    cause: LeftOutCause
    message: str  # what is wrong and what to set

    @classmethod
    def of(cls, node: str, exc: SpecError) -> "LeftOut":
        cause = exc.cause if isinstance(exc, NodeLeftOut) else LeftOutCause.UNREADABLE
        return cls(node, cause, str(exc))


def waiting_note(left_out: Mapping[str, LeftOut]) -> str:
    """What a pod waiting for room is told of the nodes left out ("" when none is)."""
    if not left_out:
        return ""
    named = [f"{name} ({SHORT[lo.cause]})" for name, lo in sorted(left_out.items())]
    more = len(named) - MAX_NAMED
    listed = ", ".join(named[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")
    return (
        f"{len(named)} node(s) left out by gpupool: {listed} — "
        "`kubectl describe node` says what to set"
    )


def changes(
    reported: Mapping[str, LeftOut], now: Mapping[str, LeftOut]
) -> tuple[list[LeftOut], list[str]]:
    """(nodes left out for a reason not yet reported, nodes taken back): what to say now."""
    new = [lo for name, lo in sorted(now.items()) if reported.get(name) != lo]
    back = sorted(set(reported) - set(now))
    return new, back


def node_event(lo: LeftOut, uid: str, instance: str) -> dict[str, Any]:
    """A Warning Event on the Node (cluster-scoped: the Event lives in ``default`` with an
    empty involved namespace, as the kubelet's and controllers' node Events do, so
    ``kubectl describe node`` shows it)."""
    involved = {"apiVersion": "v1", "kind": "Node", "name": lo.node, "uid": uid or lo.node}
    return event_body(involved, EVENT_REASON, lo.message, "Warning", instance)

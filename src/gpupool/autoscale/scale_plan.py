"""Which replicas a scaling step adds, drains and stops (pure: the reconciler applies it).

As Knative splits its autoscaler, the decider here turns "the service wants N replicas" into
actions on named replicas; the service reconciler reads the replicas before and writes these
actions after, deciding nothing on its own.

Scale-out adds what is missing unless replacements are backing off. Scale-in (when allowed:
advisory mode may hold it) takes pending replicas first, then ones not ready, then the
youngest ready ones; a ready one is drained — it leaves the endpoints at once — and stops when
its requests in flight reach zero or after ``drain_s``.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


class ReplicaView(Protocol):
    @property
    def job_id(self) -> int: ...
    @property
    def state(self) -> str: ...  # the replica's job state: pending, admitted, running, ...
    @property
    def ready(self) -> bool: ...
    @property
    def ready_at(self) -> float | None: ...
    @property
    def draining_since(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    desired: int
    add: int = 0  # new replicas to queue
    drain: tuple[int, ...] = ()  # ready replicas that leave the endpoints and drain now
    stop: tuple[tuple[int, str], ...] = ()  # (replica job, why) to stop now
    held: bool = False  # a scale-in was wanted but not allowed (advisory mode)


def shrinks(replicas: Sequence[ReplicaView], desired: int) -> bool:
    """Whether reaching ``desired`` takes replicas away (so advisory mode has a say)."""
    return sum(1 for r in replicas if r.draining_since is None) > desired


def plan_scale(
    replicas: Sequence[ReplicaView],
    in_flight: Mapping[int, float | None],
    desired: int,
    now: float,
    *,
    service: str,
    drain_s: float,
    backing_off: bool = False,
    may_scale_in: bool = True,
) -> ScaleDecision:
    """``replicas``: the service's live ones (draining included); ``in_flight``: each one's
    requests in flight at the last reading (absent or None: not known)."""
    serving = [r for r in replicas if r.draining_since is None]
    add = 0 if backing_off else max(0, desired - len(serving))
    drain: list[int] = []
    stop: list[tuple[int, str]] = []
    held = False
    if len(serving) > desired:
        if may_scale_in:
            order = sorted(
                serving, key=lambda r: (r.state == "running", r.ready, -(r.ready_at or 0.0))
            )
            for r in order[: len(serving) - desired]:
                if r.state != "running" or not r.ready:
                    stop.append((r.job_id, f"scaled in (service {service})"))
                else:
                    drain.append(r.job_id)
        else:
            held = True
    for r in replicas:
        since = now if r.job_id in drain else r.draining_since
        if since is None:
            continue
        idle = in_flight.get(r.job_id) == 0
        if idle or now - since >= drain_s:
            stop.append((r.job_id, f"scaled in (service {service}), drained"))
    return ScaleDecision(desired, add, tuple(drain), tuple(stop), held)

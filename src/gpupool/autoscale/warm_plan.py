"""Which replicas a scaling step wakes, parks, adds, drains and stops when a service keeps
warm engines (issue 49; pure: the reconciler applies it).

A service with ``warm`` engines keeps that many replicas alive, awake or parked (asleep, its
weights in host memory, its card lent to training). Scale-out first cancels a park not yet
done, then wakes parked replicas (seconds: the training on the card is vacated, the engine
woken), and adds new replicas (cold: a card found, a model loaded) only past them. Scale-in
drains ready replicas as before; a drained one parks while the engines are no more than
``warm``, else stops. Replicas still starting are not stopped to scale in while the engines
are no more than ``warm`` (each parks once ready: stopping it would start another). Engines
missing from ``warm`` are added (they park once ready). A wake not ready within
``wake_timeout_s`` stops the replica (its card is not coming back; a cold one replaces it).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpupool.autoscale.scale_plan import ReplicaView


class WarmView(ReplicaView, Protocol):
    @property
    def parked(self) -> bool: ...
    @property
    def park_at(self) -> float | None: ...
    @property
    def wake_at(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class WarmDecision:
    desired: int
    add: int = 0
    drain: tuple[int, ...] = ()
    stop: tuple[tuple[int, str], ...] = ()
    park: tuple[int, ...] = ()  # drained: park now (the scheduler lends its card)
    wake: tuple[int, ...] = ()  # parked: wake now (the scheduler takes its card back)
    unpark: tuple[int, ...] = ()  # a park asked, not yet done: serve on
    held: bool = False


def asleep(r: WarmView) -> bool:
    """Parked or parking, with no wake asked: not serving."""
    return (r.parked or r.park_at is not None) and r.wake_at is None


def plan_warm(
    replicas: Sequence[WarmView],
    in_flight: Mapping[int, float | None],
    desired: int,
    now: float,
    *,
    service: str,
    warm: int,
    drain_s: float,
    wake_timeout_s: float,
    backing_off: bool = False,
    may_scale_in: bool = True,
) -> WarmDecision:
    stop: list[tuple[int, str]] = []
    for r in replicas:
        if r.wake_at is not None and not r.ready and now - r.wake_at > wake_timeout_s:
            stop.append(
                (r.job_id, f"its wake took over {wake_timeout_s:.0f} s (service {service})")
            )
    stopped = {j for j, _ in stop}
    live = [r for r in replicas if r.job_id not in stopped]
    engines = len(live)
    serving = [r for r in live if r.draining_since is None and not asleep(r)]
    need = desired - len(serving)
    unpark: list[int] = []
    wake: list[int] = []
    drain: list[int] = []
    add = 0
    held = False
    if need > 0:
        parking = [r for r in live if r.park_at is not None and not r.parked and r.wake_at is None]
        parked = [r for r in live if r.parked and r.park_at is None and r.wake_at is None]
        for r in parking[:need]:
            unpark.append(r.job_id)
        need -= len(unpark)
        for r in parked[:need]:
            wake.append(r.job_id)
        need -= len(wake)
        add = 0 if backing_off else need
    elif need < 0 and may_scale_in:
        order = sorted(serving, key=lambda r: (r.state == "running", r.ready, -(r.ready_at or 0.0)))
        over = -need
        for r in order:
            if over == 0:
                break
            if r.state == "running" and r.ready:
                drain.append(r.job_id)
            elif engines > warm:
                stop.append((r.job_id, f"scaled in (service {service})"))
                engines -= 1
            else:
                continue  # starting: it parks once ready
            over -= 1
    elif need < 0:
        held = True
    park: list[int] = []
    for r in live:
        since = now if r.job_id in drain else r.draining_since
        if since is None or not (in_flight.get(r.job_id) == 0 or now - since >= drain_s):
            continue
        if engines <= warm:
            park.append(r.job_id)
        else:
            stop.append((r.job_id, f"scaled in (service {service}), drained"))
            engines -= 1
    if not backing_off:
        add += max(0, warm - engines - add)
    return WarmDecision(
        desired, add, tuple(drain), tuple(stop), tuple(park), tuple(wake), tuple(unpark), held
    )

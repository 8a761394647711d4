"""Replay a request-rate trace through an autoscaling policy and measure what users would feel.

Time moves in ticks (10 s by default). After serving tick ``i`` with the replicas ready then,
the policy sees the load up to tick ``i`` and sets desired replicas; a new replica serves from
tick ``i + 1 + lead`` where ``lead`` covers the preemption grace that frees a card from training
plus the model's load time (the cold path). A service with ``warm`` parked engines (asleep on
cards training uses, weights in host memory) wakes one for each replica up to ``warm`` after
``warm_lead_s`` instead (the vacate's short grace plus the wake): the warm path (a policy
that sets the engines kept, ``WarmPolicy``, overrides ``warm`` tick by tick). Scale-in
cancels the starting replica that would serve last first, then drains ready ones; a drained
warm replica parks again.

Queueing model (stated, not hidden): a fluid FIFO queue in front of the replicas. Each tick
``rate * tick_s`` requests arrive and ``ready * replica_rps * tick_s`` can be served; the rest
waits. A request's wait is the backlog it joins divided by the serving rate; requests that would
wait longer than ``timeout_s`` are dropped by the balancer and counted unserved. Below capacity
the queue is empty (``replica_rps`` is the rate a replica holds within its latency target, so the
queueing inside a replica is already in it).
"""

from bisect import insort
from dataclasses import dataclass
from math import ceil
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class ServiceModel:
    """What one replica serves and what it costs to start one."""

    replica_rps: float
    load_s: float
    grace_s: float
    min_replicas: int = 1
    max_replicas: int = 40
    pool_gpus: int = 40
    gpus_per_replica: float = 1.0
    restart_cost_s: float = 0.0
    timeout_s: float = 60.0
    slo_wait_s: float = 2.0  # a request waiting longer than this missed its SLO
    slo_fraction: float = 0.01  # a minute with more such requests (or dropped) violates
    warm: int = 0  # parked engines: the first ``warm`` replicas start on the warm path
    warm_lead_s: float = 0.0  # from "scale up" to serving for a parked engine

    @property
    def lead_s(self) -> float:
        """From "scale up" to serving when the card must be taken back from training."""
        return self.grace_s + self.load_s


class Policy(Protocol):
    """Sets desired replicas at the end of tick ``i`` from what was observed up to ``i``."""

    def desired(self, i: int, ready: int, starting: int) -> int: ...


@runtime_checkable
class WarmPolicy(Policy, Protocol):
    """A policy that also sets how many engines are kept warm (the SLO feedback grows them)."""

    def engines(self) -> int: ...


@dataclass(frozen=True)
class Outcome:
    underprovisioned_min: float
    slo_violating_min: float
    unserved_requests: float
    wait_p95_s: float
    replica_hours: float
    training_gpu_hours: float
    scale_ups: int
    replicas: np.ndarray  # held per tick: ready and starting
    ready: np.ndarray  # serving per tick

    def summary(self) -> dict[str, float]:
        return {
            "underprovisioned_min": round(self.underprovisioned_min, 1),
            "slo_violating_min": round(self.slo_violating_min, 1),
            "unserved_requests": round(self.unserved_requests),
            "wait_p95_s": round(self.wait_p95_s, 2),
            "replica_hours": round(self.replica_hours, 1),
            "training_gpu_hours": round(self.training_gpu_hours, 1),
            "scale_ups": self.scale_ups,
        }


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    if weights.sum() <= 0:
        return 0.0
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, q * cum[-1])])


def slo_violating_minutes(
    arrivals: np.ndarray, harmed: np.ndarray, tick_s: int, fraction: float
) -> float:
    """Minutes in which more than ``fraction`` of the requests that arrived were dropped or
    waited past the SLO (what users feel, where under-provisioned minutes count capacity:
    a short tick with an empty queue harms nobody, a tick after one may harm many)."""
    per = max(1, 60 // tick_s)
    whole = len(arrivals) // per * per
    came = arrivals[:whole].reshape(-1, per).sum(axis=1)
    hurt = harmed[:whole].reshape(-1, per).sum(axis=1)
    return float(np.count_nonzero(hurt > fraction * np.maximum(came, 1e-9)) * per * tick_s / 60)


def replay(
    rates: np.ndarray,
    start: int,
    end: int,
    policy: Policy,
    model: ServiceModel,
    tick_s: int,
) -> Outcome:
    """Serve ticks ``start .. end-1`` of ``rates`` (req/s per tick) with ``policy``."""
    lead = ceil(model.lead_s / tick_s)
    warm_lead = ceil(model.warm_lead_s / tick_s)
    mu = model.replica_rps
    ready = min(model.max_replicas, max(model.min_replicas, ceil(rates[start] / mu)))
    starting: list[int] = []  # the tick each starting replica serves from, sorted
    backlog = 0.0
    n = end - start
    held = np.zeros(n)
    serving = np.zeros(n)
    waits = np.zeros(n)
    arrivals = np.zeros(n)
    harmed = np.zeros(n)  # requests dropped, or waiting past the SLO, per tick
    short = 0
    unserved = 0.0
    scale_ups = 0
    engines_now = policy.engines if isinstance(policy, WarmPolicy) else None
    for k, i in enumerate(range(start, end)):
        served_from = 0
        while served_from < len(starting) and starting[served_from] <= i:
            served_from += 1
        if served_from:
            del starting[:served_from]
            ready += served_from
        demand = rates[i]
        serving[k] = ready
        serve = ready * mu
        short += serve < demand
        backlog += (demand - serve) * tick_s
        backlog = max(0.0, backlog)
        limit = serve * model.timeout_s
        dropped = max(0.0, backlog - limit)
        unserved += dropped
        backlog = min(backlog, limit)
        arrivals[k] = demand * tick_s
        waits[k] = backlog / serve if serve > 0 else model.timeout_s
        harmed[k] = dropped + (arrivals[k] - dropped if waits[k] > model.slo_wait_s else 0.0)
        want = policy.desired(i, ready, len(starting))
        want = min(model.max_replicas, max(model.min_replicas, want))
        have = ready + len(starting)
        warm = model.warm if engines_now is None else engines_now()
        for rank in range(have, want):
            insort(starting, i + 1 + (warm_lead if rank < warm else lead))
            scale_ups += 1
        for _ in range(have - want):
            if starting:
                starting.pop()
            else:
                ready -= 1
        held[k] = ready + len(starting)
    gpu_s = held * model.gpus_per_replica * tick_s
    lost_s = scale_ups * model.gpus_per_replica * model.restart_cost_s
    training_s = model.pool_gpus * n * tick_s - gpu_s.sum() - lost_s
    return Outcome(
        underprovisioned_min=short * tick_s / 60,
        slo_violating_min=slo_violating_minutes(arrivals, harmed, tick_s, model.slo_fraction),
        unserved_requests=unserved,
        wait_p95_s=_weighted_quantile(waits, arrivals, 0.95),
        replica_hours=float(held.sum() * tick_s / 3600),
        training_gpu_hours=float(training_s / 3600),
        scale_ups=scale_ups,
        replicas=held,
        ready=serving,
    )

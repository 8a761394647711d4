"""Training GPU-hours harvested beside a service, net of the work preemption loses (pure).

Every card the service holds in any state (starting — its training being vacated, loading or
waking —, ready, draining) is held; the training backlog takes what is left, in jobs of
``gang`` cards that need their cards on one server. When the service takes cards, the
training jobs on them stop and lose ``lost_per_stop_s`` of work per card (what they did since
their last checkpoint, or the grace they spend saving one on the signal); when cards come
back, a job restarts from its checkpoint, ``restart_s`` per card without progress. A job of
a gang stops whole when one of its cards is taken.

Where the service's cards lie decides how many gangs fit: ``pack`` fills servers one by one
(the rest keep whole servers for gangs), ``spread`` (the product's `spread` policy for
replicas: the emptiest node first) puts them round-robin, so one replica per server breaks
a 4-card gang on each.
"""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Training:
    servers: int
    cards_per_server: int
    gang: int = 1
    lost_per_stop_s: float = 600.0
    restart_s: float = 60.0
    pack: bool = True


def training_slots(held_cards: np.ndarray, t: Training) -> np.ndarray:
    """Training jobs (of ``t.gang`` cards) that fit beside ``held_cards`` per tick."""
    cps, servers, gang = t.cards_per_server, t.servers, t.gang
    held = np.minimum(np.asarray(held_cards, dtype=int), servers * cps)
    per_server = cps // gang
    if t.pack:
        full, part = held // cps, held % cps
        free_servers = servers - full - (part > 0)
        slots = free_servers * per_server + np.where(part > 0, (cps - part) // gang, 0)
    else:
        base, extra = held // servers, held % servers  # ``extra`` servers hold one more
        slots = (servers - extra) * ((cps - base) // gang) + extra * np.maximum(
            (cps - base - 1) // gang, 0
        )
    out: np.ndarray = slots.astype(int)
    return out


@dataclass(frozen=True)
class Harvest:
    gpu_hours: float  # training cards running, net of lost work and restarts
    lost_gpu_hours: float  # work lost by stopped jobs plus restarts
    stops: int  # training jobs stopped for the service

    def summary(self) -> dict[str, float]:
        return {
            "gpu_hours": round(self.gpu_hours, 1),
            "lost_gpu_hours": round(self.lost_gpu_hours, 1),
            "stops": self.stops,
        }


def harvest(
    held_replicas: np.ndarray, gpus_per_replica: float, tick_s: int, t: Training
) -> Harvest:
    """What training harvests over the ticks of ``held_replicas`` (replicas held per tick)."""
    cards = np.ceil(np.asarray(held_replicas, dtype=float) * gpus_per_replica - 1e-9)
    slots = training_slots(cards, t)
    change = np.diff(slots)
    stops = int(-change[change < 0].sum())
    starts = int(change[change > 0].sum())
    lost_s = t.gang * (stops * t.lost_per_stop_s + starts * t.restart_s)
    running_s = float(slots.sum()) * t.gang * tick_s
    return Harvest((running_s - lost_s) / 3600, lost_s / 3600, stops)

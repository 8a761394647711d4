"""Knative-KPA-like reactive autoscaling: the baseline predictive scaling has to beat.

As Knative's KPA does: desired = ceil(stable-window mean / (replica target * utilisation)); a
panic window (10% of the stable window) that sees desired at or above ``panic_threshold`` times
the ready replicas enters panic mode for one stable window, in which replicas only go up.
Scale-in is further held back by ``scale_down_delay_s`` (the highest desired over that span,
Knative's ``scale-down-delay``), and at most halves per decision (``max-scale-down-rate`` 2).
``utilisation`` is the headroom knob (Knative's ``target-utilization-percentage``, default 70%).
"""

from dataclasses import dataclass, field
from math import ceil

import numpy as np

from gpupool.autoscale.load import trailing_mean


@dataclass
class Reactive:
    rates: np.ndarray
    tick_s: int
    replica_rps: float
    utilisation: float = 0.7
    stable_s: float = 60.0
    panic_threshold: float = 2.0
    scale_down_delay_s: float = 0.0
    _stable: np.ndarray = field(init=False, repr=False)
    _panic: np.ndarray = field(init=False, repr=False)
    _panic_until: int = field(default=-1, init=False)
    _recent: list[int] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        ticks = max(1, round(self.stable_s / self.tick_s))
        self._stable = trailing_mean(self.rates, ticks)
        self._panic = trailing_mean(self.rates, max(1, round(ticks / 10)))

    def desired(self, i: int, ready: int, starting: int) -> int:
        per = self.replica_rps * self.utilisation
        stable = ceil(self._stable[i] / per - 1e-9)
        panic = ceil(self._panic[i] / per - 1e-9)
        if ready and panic >= self.panic_threshold * ready:
            self._panic_until = i + round(self.stable_s / self.tick_s)
        if i < self._panic_until:
            return max(panic, stable, ready + starting)
        want = max(stable, (ready + starting + 1) // 2)
        delay = round(self.scale_down_delay_s / self.tick_s)
        if delay:
            self._recent.append(want)
            del self._recent[: -delay or None]
            want = max(self._recent)
        return want

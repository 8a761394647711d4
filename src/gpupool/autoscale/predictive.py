"""Predictive autoscaling: be ready for the forecast peak before it comes.

A replica asked for now serves after the lead time (preemption grace + model load), so the
policy sizes for the forecast peak over the next ``lead + 1`` ticks: the forecaster's quantile
of the rise, learned per hour of the day, is the headroom that hour needs. ``headroom``
multiplies the forecast; it is the knob the comparison sweeps.
"""

from dataclasses import dataclass
from math import ceil

import numpy as np


@dataclass
class Predictive:
    up: np.ndarray
    replica_rps: float
    headroom: float = 1.0

    def desired(self, i: int, ready: int, starting: int) -> int:
        return ceil(float(self.up[i]) * self.headroom / self.replica_rps - 1e-9)

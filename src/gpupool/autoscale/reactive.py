"""The reactive baseline in the simulator: the online KPA fed the trace tick by tick."""

from dataclasses import dataclass

import numpy as np

from gpupool.autoscale.kpa import Kpa


@dataclass
class Reactive:
    rates: np.ndarray
    tick_s: int
    kpa: Kpa

    def desired(self, i: int, ready: int, starting: int) -> int:
        self.kpa.observe(i * self.tick_s, float(self.rates[i]))
        return self.kpa.desired(i * self.tick_s, ready, starting)

"""The reactive baseline in the simulator: the online KPA fed the trace tick by tick."""

from dataclasses import dataclass, field

import numpy as np

from gpupool.autoscale.kpa import Kpa


@dataclass
class Reactive:
    rates: np.ndarray
    tick_s: int
    replica_rps: float
    utilisation: float = 0.7
    stable_s: float = 60.0
    panic_threshold: float = 2.0
    scale_down_delay_s: float = 0.0
    _kpa: Kpa = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._kpa = Kpa(
            self.replica_rps,
            self.utilisation,
            self.stable_s,
            self.panic_threshold,
            self.scale_down_delay_s,
        )

    def desired(self, i: int, ready: int, starting: int) -> int:
        self._kpa.observe(i * self.tick_s, float(self.rates[i]))
        return self._kpa.desired(i * self.tick_s, ready, starting)

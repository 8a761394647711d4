"""The reactive policies in the simulator: the online KPA fed the trace tick by tick, and
gpupool's own decider (``autoscale.scaler``, the live reconciler's code) with SLO feedback."""

from dataclasses import dataclass, field

import numpy as np

from gpupool.autoscale.kpa import Kpa
from gpupool.autoscale.scaler import ScalerState, decide, judge_minute, new_state
from gpupool.autoscale.slo_feedback import BUDGET, SloFeedback, kept_warm

NO_BOUNDS = (0, 1_000_000)  # the replay holds the service's own bounds


@dataclass
class Reactive:
    rates: np.ndarray
    tick_s: int
    kpa: Kpa

    def desired(self, i: int, ready: int, starting: int) -> int:
        self.kpa.observe(i * self.tick_s, float(self.rates[i]))
        return self.kpa.desired(i * self.tick_s, ready, starting)


@dataclass
class SloReactive:
    """The live reconciler's steps on the trace: each tick the load (requests/s) is read and
    ``scaler.decide`` sets desired replicas; at each minute's last tick the reading is judged
    (``scaler.judge_minute``), as the reconciler judges the sample it writes once a minute,
    and the SLO feedback sets the headroom and the engines kept warm for what follows."""

    rates: np.ndarray
    tick_s: int
    replica_rps: float
    utilisation: float  # the declared headroom (1 / utilisation), the floor
    stable_s: float
    engines_declared: int = 0
    most: int = NO_BOUNDS[1]
    budget: float = BUDGET  # the share of minutes that may violate
    state: ScalerState = field(init=False)

    def __post_init__(self) -> None:
        self.state = new_state("rps", self.replica_rps, self.utilisation, self.stable_s, 0.0)
        self.state.feedback = SloFeedback(self.budget)

    def desired(self, i: int, ready: int, starting: int) -> int:
        load = float(self.rates[i])
        want = decide(self.state, load, i * self.tick_s, ready, starting, NO_BOUNDS)
        if ((i + 1) * self.tick_s) % 60 == 0:
            judge_minute(self.state, load, ready)
        return want

    def engines(self) -> int:
        """Engines kept warm now: the declared ones grown with the SLO feedback."""
        return kept_warm(self.engines_declared, self.state.feedback.raised, self.most)

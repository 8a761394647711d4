"""Knative-KPA-like reactive autoscaling, online: fed one observation at a time.

As Knative's KPA does: desired = ceil(stable-window mean / (target per replica *
utilisation)); a panic window (10% of the stable window) whose desired reaches
``panic_threshold`` times the ready replicas enters panic mode for one stable window, in which
replicas only go up. Scale-in is held back by ``scale_down_delay_s`` (the highest desired over
that span, Knative's ``scale-down-delay``) and at most halves per decision
(``max-scale-down-rate`` 2). ``utilisation`` is the headroom knob (Knative's
``target-utilization-percentage``, default 70%). The simulator and the live autoscaler both
decide with this class.
"""

from collections import deque
from dataclasses import dataclass, field
from math import ceil


class _Window:
    """Mean of the observations of the last ``span`` seconds (at least the latest one)."""

    def __init__(self, span: float):
        self.span = span
        self.items: deque[tuple[float, float]] = deque()
        self.total = 0.0

    def add(self, t: float, value: float) -> None:
        self.items.append((t, value))
        self.total += value
        while len(self.items) > 1 and self.items[0][0] <= t - self.span:
            self.total -= self.items.popleft()[1]

    def mean(self) -> float:
        return self.total / len(self.items) if self.items else 0.0


@dataclass
class Kpa:
    per_replica: float
    utilisation: float = 0.7
    stable_s: float = 60.0
    panic_threshold: float = 2.0
    scale_down_delay_s: float = 0.0
    _stable: _Window = field(init=False, repr=False)
    _panic: _Window = field(init=False, repr=False)
    _panic_until: float = field(default=float("-inf"), init=False)
    _recent: deque[tuple[float, int]] = field(default_factory=deque, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.per_replica <= 0 or not 0 < self.utilisation <= 1:
            raise ValueError("the target per replica must be > 0 and utilisation in (0, 1]")
        self._stable = _Window(self.stable_s)
        self._panic = _Window(self.stable_s / 10)

    def observe(self, t: float, value: float) -> None:
        """The load (the target metric summed over replicas) seen at time ``t``."""
        self._stable.add(t, value)
        self._panic.add(t, value)

    def desired(self, t: float, ready: int, starting: int) -> int:
        per = self.per_replica * self.utilisation
        stable = ceil(self._stable.mean() / per - 1e-9)
        panic = ceil(self._panic.mean() / per - 1e-9)
        if ready and panic >= self.panic_threshold * ready:
            self._panic_until = t + self.stable_s
        if t < self._panic_until:
            return max(panic, stable, ready + starting)
        want = max(stable, (ready + starting + 1) // 2)
        if self.scale_down_delay_s > 0:
            self._recent.append((t, want))
            while self._recent[0][0] <= t - self.scale_down_delay_s:
                self._recent.popleft()
            want = max(w for _, w in self._recent)
        return want

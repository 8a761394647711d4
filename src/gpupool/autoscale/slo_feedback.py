"""SLO feedback: a service's headroom adapted online from its own violating minutes (issue 66;
pure: no I/O, the simulator and the live reconciler step the same class).

A fixed headroom chosen on one week misses the SLO on the next when the load changes. Here
the headroom the service declared (the KPA's ``utilisation``, the simulator's swept setting)
is a floor, and a multiplier ``raised`` on it follows what the service itself measures, one
verdict a minute:

- a **violating minute** (:func:`violated`: the minute's load above what its ready replicas
  hold at their target) raises it at once: ``raised *= UP``, at most ``CEILING``;
- an unharmed minute lowers it slowly, and only **while the budget is unspent**: the
  violating minutes of about the last day (``spent``, decayed by ``1 - 1/WINDOW_MIN`` a
  minute) are fewer than the budget allows over that day (``AIM * budget * WINDOW_MIN``);
  then ``raised *= DOWN``, never below 1 (the declared headroom).

``DOWN`` is set so that ``UP ** a * DOWN ** (1 - a) == 1`` at ``a = AIM * budget``: a service
violating ``a`` of its minutes keeps its headroom where it is, one violating more has it
rising, one violating less has it falling back to the floor. Over a long run away from the
bounds the share of violating minutes is therefore ``a``; ``AIM`` (half the budget) leaves the
other half for the minutes the controller needs to climb after a change. The number of warm
engines (parked, woken in seconds) follows the same multiplier (:func:`kept_warm`).
"""

from dataclasses import dataclass
from math import ceil, exp, log

UP = 1.1  # a violating minute raises the headroom by 10%
CEILING = 2.0  # at most twice the declared headroom
AIM = 0.5  # the share of the budget the controller aims to spend
WINDOW_MIN = 1440  # the budget is counted over about the last day's minutes
BUDGET = 0.01  # the SLO's budget when none is declared: 1% of minutes may violate


def down_factor(budget: float, up: float = UP, aim: float = AIM) -> float:
    """The per-minute decrease that balances ``up`` at ``aim * budget`` violating minutes."""
    a = aim * budget
    return exp(-log(up) * a / (1 - a))


@dataclass(frozen=True, slots=True)
class SloFeedback:
    """The controller's whole state: two numbers (a leader rebuilds them from the samples)."""

    budget: float = BUDGET  # share of minutes that may violate (the declared SLO)
    raised: float = 1.0  # the multiplier on the declared headroom, 1 .. CEILING
    spent: float = 0.0  # violating minutes of about the last day (decayed)

    def __post_init__(self) -> None:
        if not 0 < self.budget < 1:
            raise ValueError(f"budget: {self.budget} is not a share of minutes in (0, 1)")

    @property
    def allowance(self) -> float:
        """Violating minutes the aimed-at budget allows over the window."""
        return AIM * self.budget * WINDOW_MIN

    def step(self, violating: bool) -> "SloFeedback":
        """The state after one minute's verdict."""
        spent = self.spent * (1 - 1 / WINDOW_MIN) + (1.0 if violating else 0.0)
        if violating:
            raised = min(CEILING, self.raised * UP)
        elif spent < self.allowance:
            raised = max(1.0, self.raised * down_factor(self.budget))
        else:
            raised = self.raised
        return SloFeedback(self.budget, raised, spent)


def violated(load: float, ready: int, per_replica: float) -> bool:
    """Whether a minute's reading violates: the load (the metric summed over the ready
    replicas) above what they hold at their target. For rps and concurrency that is more
    requests than the replicas serve within their latency target; for latency_p95, whose load
    is ``ready * p95 / target``, a p95 above the target."""
    return load > ready * per_replica * (1 + 1e-9)


def kept_warm(declared: int, raised: float, most: int) -> int:
    """Engines kept (awake or parked): the declared number grown with the headroom, at most
    ``most`` (the service's max replicas); none when the service declared none."""
    if declared <= 0:
        return 0
    return min(most, max(declared, ceil(declared * raised - 1e-9)))

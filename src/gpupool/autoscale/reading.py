"""What one look at a replica found: whether it serves, and its load counters."""

from dataclasses import dataclass, field


@dataclass
class Reading:
    ready: bool
    requests_total: float | None = None
    in_flight: float | None = None
    buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count
    error: str = ""
    gpu_util: float | None = None  # % of its cards, from the agents (not the replica)
    asleep: bool | None = None  # what its GET /is_sleeping said (None: not asked, no answer)
    at: float | None = None  # when the look began (epoch seconds; None: the reader's now)

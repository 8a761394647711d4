"""How long an agent waits before trying the server again."""

import random

MAX_BACKOFF_S = 60.0


def backoff_s(sync_s: float, failures: int, rng: random.Random) -> float:
    """Wait after ``failures`` failed calls in a row: doubling from ``sync_s`` up to 16 times
    it (at most a minute), jittered by ±50% — agents that all retried every ``sync_s`` kept
    an overloaded server overloaded (1,000 registrations timing out and sent again)."""
    base = min(sync_s * 2 ** min(max(failures - 1, 0), 4), MAX_BACKOFF_S)
    return base * rng.uniform(0.5, 1.5)

"""How long an agent waits before trying the server again."""

import random

MAX_BACKOFF_S = 60.0
LEASE_RETRY_FLOOR_S = 1.0  # near the lease's end, tries come no closer than this


def backoff_s(sync_s: float, failures: int, rng: random.Random) -> float:
    """Wait after ``failures`` failed calls in a row: doubling from ``sync_s`` up to 16 times
    it (at most a minute), jittered by ±50% — agents that all retried every ``sync_s`` kept
    an overloaded server overloaded (1,000 registrations timing out and sent again)."""
    base = min(sync_s * 2 ** min(max(failures - 1, 0), 4), MAX_BACKOFF_S)
    return base * rng.uniform(0.5, 1.5)


def within_lease(wait_s: float, lease_left_s: float | None) -> float:
    """``wait_s``, shortened to a third of what is left of the lease its workloads run under
    (not under a second): a server back before the lease runs out hears from the agent before
    it does. A backoff of 4–12 s after three failures let a 10 s outage outlast a 13 s lease
    and stop every workload of the node (the fault suite, issue 44). No lease, or one already
    over: the backoff as it is."""
    if lease_left_s is None or lease_left_s <= 0:
        return wait_s
    return min(wait_s, max(LEASE_RETRY_FLOOR_S, lease_left_s / 3))

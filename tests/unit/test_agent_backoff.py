"""An agent that keeps failing to reach its server waits longer each time, with jitter, so
an overloaded server is not kept overloaded by retries arriving in step."""

import random

from gpupool.agent.backoff import MAX_BACKOFF_S, backoff_s


def test_waits_double_up_to_sixteen_times_and_a_minute_jittered():
    rng = random.Random(7)
    for failures, base in [(0, 1), (1, 1), (2, 2), (3, 4), (5, 16), (9, 16)]:
        waits = [backoff_s(1.0, failures, rng) for _ in range(200)]
        assert 0.5 * base <= min(waits) and max(waits) <= 1.5 * base
        assert max(waits) - min(waits) > 0.5 * base  # spread, not in step
    assert max(backoff_s(10.0, 8, rng) for _ in range(200)) <= 1.5 * MAX_BACKOFF_S


def test_a_wait_under_a_running_lease_leaves_tries_before_it_runs_out():
    """Backing off must not outlast the lease: with 12 s left a 12 s wait would stop every
    workload of a node whose server is back after 10 s."""
    from gpupool.agent.backoff import LEASE_RETRY_FLOOR_S, within_lease

    assert within_lease(12.0, 12.0) == 4.0
    assert within_lease(2.0, 12.0) == 2.0  # a short backoff stays as it is
    assert within_lease(12.0, 1.5) == LEASE_RETRY_FLOOR_S  # near the end: every second
    assert within_lease(12.0, None) == 12.0  # nothing runs under a lease
    assert within_lease(12.0, -3.0) == 12.0  # over already: nothing left to save
    left, tries = 13.0, 0
    while left > LEASE_RETRY_FLOOR_S:  # the worst jitter every time
        left -= within_lease(backoff_s(1.0, tries + 1, random.Random(0)) * 1.5, left)
        tries += 1
    assert tries >= 5  # several tries in the lease, the last one within a second of its end

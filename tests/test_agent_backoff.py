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

"""Slowing down token guessing: after ``limit`` failed authentications from one client address
within ``window_s``, that address gets 429 with ``Retry-After`` until the oldest failure leaves
the window. Kept in memory per API process (with N workers an address may try N x limit per
window); a correct token is never slowed down unless its address is blocked."""

import threading
from collections import OrderedDict, deque


class FailedAuthLimiter:
    def __init__(self, limit: int, window_s: float, max_addresses: int = 10_000):
        self.limit = limit
        self.window_s = window_s
        self.max_addresses = max_addresses
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, address: str, now: float) -> float | None:
        """Seconds this address must wait, or None when it may try."""
        if self.limit <= 0:
            return None
        with self._lock:
            times = self._failures.get(address)
            if times is None:
                return None
            while times and times[0] <= now - self.window_s:
                times.popleft()
            if not times:
                del self._failures[address]
                return None
            if len(times) < self.limit:
                return None
            return max(times[0] + self.window_s - now, 0.001)

    def failed(self, address: str, now: float) -> None:
        if self.limit <= 0:
            return
        with self._lock:
            times = self._failures.pop(address, None) or deque(maxlen=self.limit)
            times.append(now)
            self._failures[address] = times  # most recent last
            while len(self._failures) > self.max_addresses:
                self._failures.popitem(last=False)


class Pace:
    """A token bucket per key: ``rate`` a second, at most ``burst`` at once; kept in memory
    per API process for the ``max_keys`` keys seen last."""

    def __init__(self, rate: float, burst: float, max_keys: int = 10_000):
        self.rate, self.burst, self.max_keys = rate, burst, max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at
        self._lock = threading.Lock()

    def take(self, key: str, now: float) -> float | None:
        """None when ``key`` may go now (one token taken), else the seconds until it may."""
        with self._lock:
            tokens, at = self._buckets.pop(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            wait = None if tokens >= 1 else (1 - tokens) / self.rate
            self._buckets[key] = (tokens - 1 if wait is None else tokens, now)
            while len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
            return wait

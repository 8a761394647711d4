"""A small time-bounded cache for hot read paths (token lookups, name checks).

Entries live ``ttl`` seconds; this process clears them on the changes it makes (a revoked
token, a new tenant), another server process sees such a change within ``ttl``.
"""

import time
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    def __init__(self, ttl: float, max_entries: int = 10_000):
        self.ttl = ttl
        self.max_entries = max_entries
        self._items: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        item = self._items.get(key)
        if item is None or item[0] < time.monotonic():
            return None
        return item[1]

    def put(self, key: K, value: V) -> None:
        if len(self._items) >= self.max_entries:
            self._items.clear()
        self._items[key] = (time.monotonic() + self.ttl, value)

    def clear(self) -> None:
        self._items.clear()

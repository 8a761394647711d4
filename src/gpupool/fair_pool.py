"""Work done on tenants' behalf that one tenant cannot slow down for another.

Every tenant gets at most ``per_tenant`` tasks under way at once, in a pool of threads shared
by all; its further tasks wait in a queue of its own, holding no thread. A caller hands in
tasks by key and takes the results that have finished, waiting at most as long as it says —
so a tenant whose tasks hang (a replica that answers a byte a second, a path on a stuck
filesystem) delays its own, never another's, and never the caller. A key whose task is
still queued or under way is not queued again until its result is taken. Each task bounds
its own time (a timeout on what it waits for): a thread cannot be stopped from outside.
"""

import threading
from collections import defaultdict, deque
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from functools import partial
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class FairPool(Generic[K, T]):
    def __init__(self, per_tenant: int, threads: int, name: str = "fair"):
        self.per_tenant = per_tenant
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._lock = threading.RLock()
        self._queued: dict[str, deque[tuple[K, Callable[[], T]]]] = defaultdict(deque)
        self._running: dict[str, int] = defaultdict(int)
        self._pending: set[K] = set()  # queued or under way
        self._futures: dict[K, Future[T]] = {}

    def submit(self, key: K, tenant: str, task: Callable[[], T]) -> bool:
        """Queue ``task`` under ``key`` unless that key is queued or under way already;
        whether it was queued."""
        with self._lock:
            if key in self._pending:
                return False
            self._pending.add(key)
            self._queued[tenant].append((key, task))
        self._dispatch(tenant)
        return True

    def pending(self, key: K) -> bool:
        with self._lock:
            return key in self._pending

    def take(self, keys: Iterable[K] | None = None, wait_s: float = 0.0) -> dict[K, T]:
        """The results finished by now (waiting at most ``wait_s`` for those of ``keys``),
        each handed out once; of ``keys`` only, when given (others stay to be taken)."""
        wanted = None if keys is None else set(keys)
        with self._lock:
            under_way = [f for k, f in self._futures.items() if wanted is None or k in wanted]
        if under_way and wait_s > 0:
            wait(under_way, timeout=wait_s)
        out: dict[K, T] = {}
        with self._lock:
            for key, future in list(self._futures.items()):
                if future.done() and (wanted is None or key in wanted):
                    del self._futures[key]
                    self._pending.discard(key)
                    out[key] = future.result()
        return out

    def drop(self, keep: Iterable[K]) -> None:
        """Forget finished results of keys not in ``keep`` (nobody will take them)."""
        kept = set(keep)
        with self._lock:
            for key, future in list(self._futures.items()):
                if key not in kept and future.done():
                    del self._futures[key]
                    self._pending.discard(key)

    def _dispatch(self, tenant: str) -> None:
        with self._lock:
            queue = self._queued[tenant]
            while queue and self._running[tenant] < self.per_tenant:
                key, task = queue.popleft()
                self._running[tenant] += 1
                future = self._executor.submit(task)
                self._futures[key] = future
                future.add_done_callback(partial(self._finished, tenant))

    def _finished(self, tenant: str, _done: Future[T]) -> None:
        with self._lock:
            self._running[tenant] -= 1
        self._dispatch(tenant)

    def busy(self) -> dict[str, int]:
        """Tasks queued or under way, per tenant."""
        with self._lock:
            return {t: self._running[t] + len(q) for t, q in self._queued.items() if
                    self._running[t] + len(q)}  # fmt: skip

    def close(self) -> None:
        with self._lock:
            self._queued.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

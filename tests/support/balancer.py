"""A client of a service as its users have one: requests spread over its ready endpoints."""

import itertools
import threading
import time

import httpx


class Balancer:
    """Round-robin over the service's ready endpoints (refreshed every 0.3 s); a request
    that fails on one replica is retried on another, so none is lost while one is ready."""

    def __init__(self, client: httpx.Client, service: str, tenant: str | None = None):
        self.client, self.service = client, service
        self.params = {"tenant": tenant} if tenant else {}
        self.endpoints: list[str] = []
        self.served: dict[str, int] = {}
        self.lost = 0
        self.retried = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._turn = itertools.count()
        self._refresher = threading.Thread(target=self._refresh, daemon=True)

    def __enter__(self) -> "Balancer":
        self._refresher.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._refresher.join(timeout=5)

    def _refresh(self) -> None:
        while not self._stop.is_set():
            got = self.client.get(f"/api/v1/services/{self.service}/endpoints", params=self.params)
            if got.status_code == 200:
                self.endpoints = [e["endpoint"] for e in got.json()]
            self._stop.wait(0.3)

    def send(self, tokens: int) -> None:
        for _ in range(20):
            endpoints = list(self.endpoints)
            if not endpoints:
                time.sleep(0.1)
                continue
            endpoint = endpoints[next(self._turn) % len(endpoints)]
            try:
                answer = httpx.post(f"http://{endpoint}/infer", json={"tokens": tokens},
                                    timeout=5, trust_env=False)  # fmt: skip
                answer.raise_for_status()
            except httpx.HTTPError:
                with self._lock:
                    self.retried += 1
                time.sleep(0.05)
                continue
            with self._lock:
                self.served[endpoint] = self.served.get(endpoint, 0) + 1
            return
        with self._lock:
            self.lost += 1

"""Fetches the node's orders in its own thread, by long poll when the server offers it.

The agent's loop no longer asks every second: this thread keeps one request waiting at the
server (``wait``, with the last answer's ``etag`` as ``known``), which answers as soon as the
orders change, else after ``wait_s``. The loop takes the newest answer when one comes, and
otherwise still looks after its workloads every ``sync_s`` without a request. A server without
long polling (no ``etag``) is asked every ``sync_s``, as before. While the agent's channel is
up (``channel``), the server pushes the orders there (``deliver``) and this thread asks
nothing; when it goes down, it asks at once and long-polls again."""

import logging
import threading
import time

from gpupool.agent.api import AgentApi, AgentApiError
from gpupool.agent.channel import AgentChannel
from gpupool.model.protocol import OrdersOut

log = logging.getLogger(__name__)
FAST_S = 0.5  # an unchanged answer faster than this: the server did not wait (throttle)


class OrdersPoller:
    def __init__(self, api: AgentApi, sync_s: float, wait_s: float = 25.0):
        self.api = api
        self.sync_s = sync_s
        self.wait_s = wait_s
        self.requests = 0
        self._answer: OrdersOut | None = None
        self._fresh = False
        self._error: AgentApiError | None = None
        self._cond = threading.Condition()
        self.channel: AgentChannel | None = None

    def deliver(self, answer: OrdersOut) -> None:
        """Orders that came another way (the channel): the newest answer."""
        with self._cond:
            self._answer, self._fresh, self._error = answer, True, None
            self._cond.notify_all()

    def run(self, stop: threading.Event) -> None:
        known: str | None = None
        while not stop.is_set():
            if self.channel is not None and self.channel.up.is_set():
                self.channel.down.wait(30.0)  # the channel brings them (closed on stop)
                known = None  # and once it is down, ask at once
                continue
            started = time.monotonic()
            try:
                answer = self.api.orders(self.wait_s if known else 0.0, known)
            except AgentApiError as exc:
                if stop.is_set():
                    return
                with self._cond:
                    self._error = exc
                    self._cond.notify_all()
                known = None
                stop.wait(self.sync_s)
                continue
            finally:
                self.requests += 1
            etag = answer.etag
            self.deliver(answer)
            unchanged = etag is not None and etag == known
            if etag is None or (unchanged and time.monotonic() - started < FAST_S):
                stop.wait(self.sync_s)  # a server that answers at once: ask every sync_s
            known = etag

    def next(self, timeout_s: float) -> OrdersOut | None:
        """The newest answer not handed out yet, waiting up to ``timeout_s`` for one; None
        when none came. Raises the error the last request met, once."""
        with self._cond:
            if not self._fresh and self._error is None:
                self._cond.wait(timeout_s)
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            if not self._fresh:
                return None
            self._fresh = False
            return self._answer

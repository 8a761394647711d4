"""The agent's side of its channel (``agent.channel``): what its beats and telemetry do to the
agent. A mixin of ``Agent``, kept apart so the agent's module stays about its workloads."""

import ssl
import threading
import time
from typing import Any

from gpupool.agent.channel import AgentChannel
from gpupool.agent.poller import OrdersPoller
from gpupool.agent.state import Record
from gpupool.agent.telemetry_pace import TelemetryPace


class ChannelLink:
    # provided by Agent
    config: Any
    api: Any
    name: str
    heartbeat_s: float
    records: dict[int, Record]
    channel: AgentChannel | None
    pace: TelemetryPace
    _beat_now: threading.Event
    _lease_lock: threading.Lock
    _round_at: float | None  # when the loop's current round began (monotonic); None: waiting

    def _renew(self, node: dict[str, Any], sent: float) -> None: ...
    def _renew_lease(self, sent: float) -> None: ...

    def _channel(self, poller: OrdersPoller) -> AgentChannel:
        return AgentChannel(
            lambda: self.api.server,  # the server the agent's calls reach now
            self.config.token,
            self.name,
            lambda: self.heartbeat_s,
            self._beat_recorded,
            poller.deliver,
            self._channel_down,
            tls=self.api.verify if isinstance(self.api.verify, ssl.SSLContext) else None,
            lag=self._loop_lag,
        )

    def _loop_lag(self) -> float:
        """How long the agent's loop has been in its current round (0 while it waits)."""
        started = self._round_at
        return 0.0 if started is None else time.monotonic() - started

    def _by_channel(self, devices: list[dict[str, Any]], now: float) -> bool:
        """While the channel is up its beats renew the lease: telemetry goes on it only when
        due (``telemetry_pace``). False: send a heartbeat over HTTP."""
        ch = self.channel
        if ch is None or not ch.up.is_set() or ch.telemetry_refused:
            return False
        busy = any(not r.released for r in self.records.values())
        held = self.held()
        if not self.pace.due(devices, busy, now, held):
            return True
        if ch.send_telemetry(devices):
            self.pace.sent(devices, now, held)
            return True
        return False

    def held(self) -> frozenset[int]:
        """The cards the workloads here hold (their telemetry follows them)."""
        return frozenset(i for r in self.records.values() for i in r.load)

    def _beat_recorded(self, frame: dict[str, Any], sent: float) -> None:
        """On the channel's thread: the server recorded a beat sent at ``sent``."""
        node = frame.get("node")
        if isinstance(node, dict):
            self._renew(node, sent)
        else:
            self._renew_lease(sent)

    def _channel_down(self) -> None:
        self._beat_now.set()  # over HTTP at once: the lease runs on
        self.pace.forget()

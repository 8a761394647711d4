"""When an agent whose lease travels on its channel sends telemetry: at once when what the
scheduler acts on changed (a card's health, mode, MIG layout, a failed mode switch) or a card
was taken or let go (its telemetry then changes for good: an idle card kept the busy figures
of the job that had left it for up to a minute), else every
``busy_s`` while workloads run (idle-card accounting samples at most a minute at a time) and
every ``idle_s`` otherwise (the dashboard counts telemetry older than two minutes as unknown).
Over HTTP, every heartbeat carries it, as before."""

from collections.abc import Sequence
from typing import Any

BUSY_S = 30.0
IDLE_S = 60.0
SIGNIFICANT = ("healthy", "mode", "mig", "mode_error")


def signature(devices: Sequence[dict[str, Any]]) -> tuple:
    """What in a heartbeat's telemetry the scheduler acts on."""
    return tuple(sorted((d.get("index"), *(repr(d.get(k)) for k in SIGNIFICANT)) for d in devices))


class TelemetryPace:
    def __init__(self, busy_s: float = BUSY_S, idle_s: float = IDLE_S):
        self.busy_s, self.idle_s = busy_s, idle_s
        self._sent_at: float | None = None
        self._signature: tuple | None = None

    def due(
        self,
        devices: Sequence[dict[str, Any]],
        busy: bool,
        now: float,
        held: frozenset[int] = frozenset(),
    ) -> bool:
        """``held``: the cards workloads hold now."""
        if self._sent_at is None or (signature(devices), held) != self._signature:
            return True
        return now - self._sent_at >= (self.busy_s if busy else self.idle_s)

    def sent(
        self, devices: Sequence[dict[str, Any]], now: float, held: frozenset[int] = frozenset()
    ) -> None:
        self._sent_at, self._signature = now, (signature(devices), held)

    def forget(self) -> None:
        """The next telemetry goes at once (the channel is new: the server may have missed
        some)."""
        self._sent_at = None

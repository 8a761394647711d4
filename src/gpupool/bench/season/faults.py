"""The season's fault schedule: each fault at its time after the replay began, applied to the
real processes, with when it happened and how long the recovery took, for the scorecard."""

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from gpupool.bench.season.plane import Plane

SERVER_KILL = "server kill -9, restarted"
AGENT_KILL = "agent process kill -9, restarted 2 s later"


@dataclass(frozen=True)
class Fault:
    kind: str
    at_s: float


@dataclass
class FaultLog:
    done: list[dict[str, Any]] = field(default_factory=list)
    server_down: list[tuple[float, float]] = field(default_factory=list)  # wall clock


def run_faults(
    plane: Plane, schedule: list[Fault], began: float, stop: threading.Event, log: FaultLog
) -> None:
    for fault in sorted(schedule, key=lambda f: f.at_s):
        if stop.wait(max(0.0, began + fault.at_s - time.time())):
            return
        at = time.time() - began
        if fault.kind == SERVER_KILL:
            killed = time.time()
            plane.kill_server()
            back = plane.start_server()
            log.server_down.append((killed, time.time()))
            log.done.append({"kind": fault.kind, "at_s": round(at, 1), "down_s": round(back, 1)})
        elif fault.kind == AGENT_KILL:
            plane.kill_host(0)
            stop.wait(2.0)
            plane.start_host(0)
            log.done.append({"kind": fault.kind, "at_s": round(at, 1), "down_s": 2.0})
        else:
            raise ValueError(f"unknown fault {fault.kind}")

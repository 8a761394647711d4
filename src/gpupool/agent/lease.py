"""The node's lease, shared by the agent and its workloads' shims through one file.

After every heartbeat the server acknowledged, the agent writes the lease's deadline: the
moment it sent that heartbeat plus ``lease_s`` (the server's node-lost timeout less a margin),
on ``CLOCK_MONOTONIC``, which every process of the machine shares and wall-clock changes do not
move. Each shim reads it a few times a second; once the deadline has passed — the agent died,
hangs, or cannot reach the server — the shim stops its workload (SIGTERM, SIGKILL after
``fence_kill_s``) on its own. The server requeues the job only after its timeout, which is
later than deadline + kill time, so the requeued copy never runs beside its orphan.
"""

import contextlib
import os
import time
from pathlib import Path


def write_lease(path: Path, deadline: float) -> None:
    """Record a new deadline (``time.monotonic()`` seconds), atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        f.write(f"{deadline:.6f}\n")
    os.replace(tmp, path)


def read_lease(path: Path) -> float | None:
    """The deadline, or None when there is no readable lease (which counts as expired)."""
    with contextlib.suppress(OSError, ValueError):
        return float(path.read_text().strip())
    return None


def expired(path: Path, now: float | None = None) -> bool:
    deadline = read_lease(path)
    return deadline is None or (time.monotonic() if now is None else now) > deadline

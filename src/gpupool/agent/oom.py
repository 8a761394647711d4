"""The kernel's OOM killer and gpupool's own processes: when a node runs out of memory the
kernel should take a workload, never the agent (and each workload's shim, which records how
it ended) or the server. Two levers, as Kubernetes uses them: gpupool's processes lower their
score where they may (root with CAP_SYS_RESOURCE: -900, as systemd's own daemons), and every
workload raises its own to ``WORKLOAD`` before it runs the job — raising needs no privilege,
so workloads are the kernel's first pick even where the first lever is not allowed (a
container without that capability)."""

import contextlib
from pathlib import Path

PROTECTED = -900  # -1000 would make the kernel never pick us, even to save the node
WORKLOAD = 500  # Kubernetes gives burstable pods 2-999 and best-effort ones 1000
SCORE = Path("/proc/self/oom_score_adj")


def protect() -> bool:
    """Lower this process's OOM score; whether it was allowed."""
    try:
        SCORE.write_text(str(PROTECTED))
    except OSError:
        return False
    return True


def as_workload() -> None:
    """In a workload's first process, before it runs the job."""
    with contextlib.suppress(OSError):
        SCORE.write_text(str(WORKLOAD))

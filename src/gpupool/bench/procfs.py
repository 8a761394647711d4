"""CPU seconds of the processes a benchmark measures, from Linux's /proc."""

import os


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (Linux /proc; 0 where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def server_processes(pid: int) -> dict[int, str]:
    """The server's processes: its API workers and scheduler process, or itself alone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        children = []
    out = {}
    for child in children:
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"scheduler_process" in cmd:
            out[child] = "scheduler"
        elif b"spawn_main" in cmd:  # uvicorn's workers (not multiprocessing's tracker)
            out[child] = "api"
    return out or {pid: "server"}

"""Workload processes on this machine: start one under the shim in its own process group,
tell whether it still runs (guarding against PID reuse), list its processes, stop it."""

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), or
    None when there is no such live process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):  # zombie or dead
        return None
    return int(fields[19])


def alive(pid: int, ticks: int) -> bool:
    return start_ticks(pid) == ticks


def group_pids(pgid: int) -> set[int]:
    """Every process in a process group (a workload and its children)."""
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.add(int(entry.name))
    return out


def launch(workdir: Path, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start ``argv`` under the shim with stdout/stderr to files in ``workdir``."""
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    shim = [sys.executable, "-m", "gpupool.agent.shim", str(workdir / "exit"), "--", *argv]
    with (workdir / "stdout").open("ab") as out, (workdir / "stderr").open("ab") as err:
        return subprocess.Popen(
            shim,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=workdir,
            start_new_session=True,
        )


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def exit_code(workdir: Path) -> int | None:
    try:
        return int((workdir / "exit").read_text().strip())
    except (OSError, ValueError):
        return None


KILL = signal.SIGKILL
TERM = signal.SIGTERM

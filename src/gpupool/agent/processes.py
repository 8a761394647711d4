"""Workload processes on this machine: start one under the shim in its own process group,
tell whether it still runs (guarding against PID reuse), list its processes, stop it.

A workload's folder in the agent's state dir (0700, the agent's user only) holds what the shim
needs (``spec.json``: command, environment, identity, cgroups, lease) and what it leaves
(``stdout``, ``stderr``, ``exit``, and ``fenced`` / ``start-error`` with a reason). The
workload itself runs elsewhere, in a working directory of its own (``LaunchSpec.cwd``).
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

SPEC = "spec.json"
EXIT = "exit"
FENCED = "fenced"
START_ERROR = "start-error"


@dataclass
class LaunchSpec:
    """What the shim runs and how: ``uid``/``gid`` None keeps the agent's user; ``lease``
    None means the workload is not self-fenced (``on_lost: keep-running``)."""

    command: list[str]
    env: dict[str, str]
    cwd: str
    uid: int | None = None
    gid: int | None = None
    cgroups: list[str] = field(default_factory=list)
    lease: str | None = None
    fence_kill_s: float = 3.0
    poll_s: float = 0.1
    files: dict[str, str] = field(default_factory=dict)  # written 0600 beside spec.json
    sandbox: dict | None = None  # gpupool.agent.sandbox.Sandbox's fields, entered as root
    # the job's own directory (sbatch --chdir, or its submit directory), entered by the
    # workload's user once it is that user; ``chdir_required``: fail rather than stay in cwd
    chdir: str | None = None
    chdir_required: bool = False

    @classmethod
    def read(cls, folder: Path) -> "LaunchSpec":
        return cls(**json.loads((folder / SPEC).read_text()))

    def write(self, folder: Path) -> None:
        fd = os.open(folder / SPEC, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(self), f)


def stat_of(pid: int | str) -> list[str] | None:
    """``/proc/PID/stat`` from its third field (the state) on — what follows the command's
    name, which may hold spaces and parentheses — or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def every_stat() -> Iterator[tuple[int, list[str]]]:
    """Every process's pid with its ``stat_of`` fields (zombies too)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := stat_of(entry.name)) is not None:
            yield int(entry.name), fields


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), or
    None when there is no such live process."""
    fields = stat_of(pid)
    if fields is None or fields[0] in ("Z", "X"):  # gone, zombie or dead
        return None
    return int(fields[19])


def alive(pid: int, ticks: int) -> bool:
    return start_ticks(pid) == ticks


def group_pids(pgid: int) -> set[int]:
    """Every process in a process group (a workload and its children)."""
    live = ((pid, f) for pid, f in every_stat() if f[0] not in ("Z", "X"))
    return {pid for pid, fields in live if int(fields[2]) == pgid}


def shim_environment() -> dict[str, str]:
    """The shim's own environment: what Python needs to find gpupool, nothing of the job's
    (which it reads from the spec) nor the agent's secrets."""
    return {k: os.environ[k] for k in ("PATH", "PYTHONPATH", "LANG") if k in os.environ}


def launch(folder: Path, spec: LaunchSpec) -> subprocess.Popen:
    """Start the shim for ``spec`` as the leader of a new process group (and session), with
    the workload's stdout/stderr going to files in ``folder``."""
    folder = folder.resolve()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name, text in spec.files.items():
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
    spec.write(folder)
    shim = [sys.executable, "-m", "gpupool.agent.shim", str(folder)]
    with (folder / "stdout").open("ab") as out, (folder / "stderr").open("ab") as err:
        return subprocess.Popen(
            shim,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=shim_environment(),
            cwd=folder,
            start_new_session=True,
        )


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (the shim's: the workload's command)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(p) for p in text.split()]
    except (OSError, ValueError):
        pass
    return [p for p, fields in every_stat() if len(fields) > 1 and fields[1] == str(pid)]


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def ended_at(folder: Path) -> float | None:
    """When the workload ended: the shim writes its exit note as it does (None without one)."""
    try:
        return (folder / EXIT).stat().st_mtime
    except OSError:
        return None


def exit_code(folder: Path) -> int | None:
    try:
        return int((folder / EXIT).read_text().strip())
    except (OSError, ValueError):
        return None


def note(folder: Path, name: str) -> str:
    """A reason the shim left (``fenced``, ``start-error``), or ""."""
    try:
        return (folder / name).read_text().strip()
    except OSError:
        return ""


def write_note(folder: Path, name: str, text: str) -> None:
    tmp = folder / f".{name}.tmp"
    tmp.write_text(text + "\n")
    os.replace(tmp, folder / name)


KILL = signal.SIGKILL
TERM = signal.SIGTERM

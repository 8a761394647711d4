"""``python -m gpupool.agent.shim FOLDER``: run one workload as ``FOLDER/spec.json`` says and
record how it ended, so an agent that restarted meanwhile still learns it.

The shim runs as the agent's user, the leader of the workload's process group: it joins the
workload's cgroups, then starts the command as the tenant's user (no supplementary groups,
umask 077) in the workload's own directory. It ignores the stop signals itself (SIGTERM, or
a job's checkpoint signal, sent to the whole group) so it outlives the command and writes
``FOLDER/exit``; SIGKILL ends both (no file: the agent knows it killed
it). While the command runs, the shim watches the node's lease (``gpupool.agent.lease``): once
it has run out, the shim stops the command on its own — TERM, then KILL after
``fence_kill_s`` — and writes ``FOLDER/fenced``, so the workload is gone before the server
requeues its job even when the agent was killed with SIGKILL.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpupool.agent import cgroups, lease, no_userns, oom
from gpupool.agent.processes import (
    EXIT,
    FENCED,
    START_ERROR,
    LaunchSpec,
    group_pids,
    write_note,
)
from gpupool.agent.sandbox import Sandbox, become, enter
from gpupool.model.checkpoint import SIGNALS, signal_number

CANNOT_START = 127
# what the agent may stop a workload with (SIGTERM, or the signal a job saves on): the shim
# outlives them to write the exit, and gives its command their default actions back
STOP_SIGNALS = tuple(signal_number(name) for name in SIGNALS)


def _default_signals() -> None:
    """In the command (after fork, before exec): obey SIGTERM / SIGINT again, and the OOM
    killer too (the shim keeps the agent's protection; the job does not); no user
    namespaces from here on."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    oom.as_workload()
    no_userns.deny()


def enter_job_dir(spec: LaunchSpec, reasons: int) -> None:
    """In the child, as the workload's user already: its own directory. A path the job chose
    is never entered by root (Popen's ``cwd`` is, before the user switch). An explicit
    --chdir that fails stops the start with the reason on ``reasons``; the submit directory
    that fails (not on this node, not the user's) leaves it in its work folder."""
    if spec.chdir is None:
        return
    try:
        os.chdir(spec.chdir)
    except OSError as exc:
        if spec.chdir_required:
            os.write(reasons, f"--chdir {spec.chdir}: {exc.strerror or exc}".encode()[:2000])
            raise


def start(spec: LaunchSpec, folder: Path | None = None) -> subprocess.Popen:
    drop = spec.uid is not None
    reasons_r, reasons_w = os.pipe()  # closed in the child at exec (close-on-exec)
    try:
        return _start(spec, folder, drop, reasons_w)
    except subprocess.SubprocessError:
        os.close(reasons_w)
        reasons_w = -1
        os.set_blocking(reasons_r, False)
        try:
            reason = os.read(reasons_r, 4000).decode(errors="replace")
        except BlockingIOError:
            reason = ""
        if reason:
            raise ValueError(reason) from None
        raise
    finally:
        os.close(reasons_r)
        if reasons_w >= 0:
            os.close(reasons_w)


def _start(spec: LaunchSpec, folder: Path | None, drop: bool, reasons: int) -> subprocess.Popen:
    env = spec.env  # no PWD: a shell takes it from the directory it starts in
    if spec.sandbox is None:

        def as_user() -> None:  # in the child, after Popen switched to the workload's user
            _default_signals()
            enter_job_dir(spec, reasons)

        return subprocess.Popen(
            spec.command,
            cwd=spec.cwd,
            env=env,
            user=spec.uid,
            group=spec.gid,
            extra_groups=[] if drop else None,
            umask=0o077 if drop else -1,
            preexec_fn=as_user,
        )
    box = Sandbox(**spec.sandbox)

    def enter_then_drop() -> None:  # in the child, as root: namespaces, then the tenant's user
        _default_signals()
        try:
            enter(box)
            become(spec.uid, spec.gid, 0o077 if drop else None)
        except OSError as exc:  # the reason, where the agent reads it (Popen only says "failed")
            reason = f"cannot start its sandbox: {exc.strerror or exc}"
            os.write(2, f"gpupool: {reason}\n".encode())
            if folder is not None:
                write_note(folder, START_ERROR, reason)
            raise
        enter_job_dir(spec, reasons)

    return subprocess.Popen(spec.command, cwd=spec.cwd, env=env, preexec_fn=enter_then_drop)


def signal_workload(spec: LaunchSpec, sig: int) -> None:
    """Every process of the workload: the process group and the cgroups, but not the shim."""
    me = os.getpid()
    for pid in group_pids(os.getpgrp()) - {me}:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            continue
    cgroups.kill(spec.cgroups, sig, spare=me)


def fence(child: subprocess.Popen, spec: LaunchSpec, folder: Path) -> int:
    """The lease ran out: stop the workload now, whatever the agent is doing."""
    write_note(
        folder,
        FENCED,
        "stopped by its node: the agent had not renewed its lease with the server in time "
        "(agent down or server unreachable), so the job can be requeued without running twice",
    )
    signal_workload(spec, signal.SIGTERM)
    deadline = time.monotonic() + spec.fence_kill_s
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(min(spec.poll_s, 0.05))
    signal_workload(spec, signal.SIGKILL)
    return child.wait()


def supervise(child: subprocess.Popen, spec: LaunchSpec, folder: Path) -> int:
    lease_file = Path(spec.lease) if spec.lease else None
    while True:
        try:
            return child.wait(timeout=spec.poll_s)
        except subprocess.TimeoutExpired:
            pass
        if lease_file is not None and lease.expired(lease_file):
            return fence(child, spec, folder)


def run(folder: Path) -> int:
    spec = LaunchSpec.read(folder)
    try:
        cgroups.join(spec.cgroups, os.getpid())
        child = start(spec, folder)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        what = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        reason = f"cannot start {spec.command[0][:200]!r}: {what}" if spec.command else what
        if not (folder / START_ERROR).exists():  # the sandbox's own reason is clearer
            print(f"gpupool: {reason}", file=sys.stderr, flush=True)
            write_note(folder, START_ERROR, reason)
        return CANNOT_START
    return supervise(child, spec, folder)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gpupool.agent.shim FOLDER", file=sys.stderr)
        return 2
    for sig in STOP_SIGNALS:  # a job's checkpoint signal is sent to its whole group too
        signal.signal(sig, signal.SIG_IGN)
    folder = Path(argv[0])
    write_note(folder, EXIT, str(run(folder)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

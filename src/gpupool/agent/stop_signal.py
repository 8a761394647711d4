"""How a workload is told to stop: SIGTERM and the agent's grace, or — a job that saves on a
signal (``gpupool.model.checkpoint``) — its signal, SIGKILL its grace (seconds) later: the
card is free seconds after the server decides. Its signal also comes ``before_limit_s``
before its time limit (Slurm's ``--signal=SIG@time``); ``shell_only`` sends it to the batch
shell alone (the shim's own child), as Slurm's ``B:`` does."""

import contextlib
import os

from gpupool.agent import cgroups
from gpupool.agent import processes as proc
from gpupool.agent.state import Record
from gpupool.model.checkpoint import Checkpoint, signal_number


def _checkpoint(rec: Record) -> Checkpoint | None:
    try:
        return Checkpoint.from_json(rec.checkpoint)
    except (KeyError, TypeError, ValueError):
        return None  # a record the server wrote wrongly: stop it the plain way


def send_stop(rec: Record) -> None:
    """The first signal of a stop."""
    c = _checkpoint(rec)
    _send(rec, c, signal_number(c.signal) if c else int(proc.TERM))


def _send(rec: Record, c: Checkpoint | None, sig: int) -> None:
    if c is not None and c.shell_only:
        for pid in proc.children(rec.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        return
    proc.signal_group(rec.pid, sig)
    cgroups.kill(rec.cgroups, sig, spare=rec.pid)


def grace_s(rec: Record, default: float) -> float:
    """From the first signal to SIGKILL."""
    c = _checkpoint(rec)
    return float(c.grace_s) if c else default


def warn_if_due(rec: Record, now: float) -> bool:
    """Send the job its signal ``before_limit_s`` before its time limit, once; True when sent."""
    c = _checkpoint(rec)
    if c is None or c.before_limit_s is None or not rec.max_runtime_s or rec.warned:
        return False
    if now < rec.started_at + rec.max_runtime_s - c.before_limit_s:
        return False
    rec.warned = True
    _send(rec, c, signal_number(c.signal))
    return True

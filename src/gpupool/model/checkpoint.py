"""A job that saves its work on a signal: the seconds-fast vacate (issue 49).

A job declares the signal it traps to checkpoint (Slurm's ``--signal``, PyTorch Lightning's
``SIGUSR1`` requeue, a ``trap`` in a batch script). When the job must stop early — preempted,
moved, cancelled, its node drained — its agent sends that signal instead of SIGTERM and
kills it after its checkpoint grace (seconds, default the server's ``checkpoint_grace_s``, 5)
instead of the agent's grace: the card is free seconds after the decision, and the job loses
only the grace. ``before_limit_s`` also sends it that long before the time limit (Slurm's
``@time``); ``shell_only`` signals only the batch shell (Slurm's ``B:``), not its children.
"""

import signal
from dataclasses import dataclass
from typing import Any

from gpupool.model.errors import SpecError

# signals a job may trap to save its work; KILL and STOP cannot be trapped, the rest (SEGV,
# CHLD, PIPE, ...) mean something else to every program
SIGNALS = (
    "HUP", "INT", "QUIT", "USR1", "USR2", "ALRM", "TERM", "CONT", "URG", "WINCH", "XCPU",
    "VTALRM", "PROF", "IO", "PWR",
)  # fmt: skip


def signal_name(value: str | int, field: str = "checkpoint.signal") -> str:
    """``USR1``, ``SIGUSR1``, ``usr1`` or its number (``10`` on Linux) as ``USR1``; SpecError
    naming the field for any other."""
    text = str(value).strip().upper()
    if text.isdigit():
        try:
            text = signal.Signals(int(text)).name
        except ValueError:
            raise SpecError(f"{field}: {value!r} is no signal", field=field) from None
    name = text.removeprefix("SIG")
    if name not in SIGNALS or not hasattr(signal, f"SIG{name}"):
        raise SpecError(
            f"{field}: {value!r} cannot be trapped to save work; one of {', '.join(SIGNALS)}",
            field=field,
        )
    return name


def signal_number(name: str) -> int:
    return int(signal.Signals[f"SIG{name}"])


@dataclass(frozen=True)
class Checkpoint:
    signal: str  # a name of SIGNALS
    grace_s: int  # from the signal to SIGKILL when it must stop early
    shell_only: bool = False
    before_limit_s: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "grace_s": self.grace_s,
            "shell_only": self.shell_only,
            "before_limit_s": self.before_limit_s,
        }

    @staticmethod
    def from_json(data: dict[str, Any] | None) -> "Checkpoint | None":
        if not data:
            return None
        return Checkpoint(
            str(data["signal"]),
            int(data["grace_s"]),
            bool(data.get("shell_only", False)),
            data.get("before_limit_s"),
        )


SLURM_SIGNAL_DEFAULT_S = 60  # sbatch --signal without @time: 60 s before the limit


def parse_sbatch_signal(value: str) -> dict[str, Any]:
    """``--signal=[{R|B}:]<sig_num>[@sig_time]`` as a checkpoint's fields (without grace).
    ``R:`` (signal only on reservation overrun) has no meaning here and is refused."""
    head, _, at = value.partition("@")
    shell_only = False
    if ":" in head:
        flag, _, head = head.partition(":")
        if flag.upper() == "R":
            raise SpecError(
                "--signal: R: (only when a reservation ends) has no meaning here", field="signal"
            )
        if flag.upper() != "B":
            raise SpecError(f"--signal: {flag!r}: is neither B: nor R:", field="signal")
        shell_only = True
    before = SLURM_SIGNAL_DEFAULT_S
    if at:
        if not at.isdigit() or not 0 < int(at) <= 65535:
            raise SpecError(f"--signal: @{at}: seconds from 1 to 65535", field="signal")
        before = int(at)
    return {
        "signal": signal_name(head, "--signal"),
        "shell_only": shell_only,
        "before_limit_s": before,
    }


def work_lost_s(
    cards: float, started: float, checkpointed: float | None, now: float, grace_s: int | None
) -> float:
    """Card-seconds of work stopping a job at ``now`` costs: what it ran since its last
    checkpoint its agent passed on (else since it started), at most the grace it spends
    saving when it saves on its signal."""
    run = cards * max(0.0, now - max(started, checkpointed or started))
    return run if grace_s is None else min(run, cards * grace_s)

"""Why a job waits, as a value: a code callers decide on, and the message people read.

Code outside the engine decides on ``Reason.code`` (hybrid pools switch cards for jobs that
wait for room, the loop counts defragmentation moves); ``str(reason)`` is the text shown on
``gpupool job show`` and in the audit log, free to be reworded."""

from dataclasses import dataclass
from enum import StrEnum


class Wait(StrEnum):
    NO_ROOM = "no-room"  # no placement fits now (the aggregated per-node refusal)
    QUOTA = "quota"  # its tenant's guarantee, borrowing or lending limits
    BEHIND = "behind"  # queued behind a starving head (backfill only)
    PREEMPTING = "preempting"  # victims or moved jobs are stopping for it
    LIMITED = "limited"  # a per-cycle bound (victim searches, defragmentation plans)
    INVALID = "invalid"  # its request cannot be read, or names what does not exist
    NEVER = "never"  # no node of the pool could ever hold it, or above its tenant's ceiling
    GATED = "gated"  # a dependency, array throttle, hold or begin time (the server's gates)
    APPROVAL = "approval"  # advisory mode: its decision waits for an operator's approval
    WAKING = "waking"  # a parked replica whose card cannot be taken back yet (says why)
    PROTECTED = "protected"  # the only jobs that would make room are within their minimum run
    # time (until when is said; scheduler/min_runtime.py)


@dataclass(frozen=True, slots=True)
class Reason:
    code: Wait
    message: str

    def __str__(self) -> str:
        return self.message

    def also(self, more: str) -> "Reason":
        """The same reason with ``more`` said after it."""
        return Reason(self.code, f"{self.message}; {more}")


class Cause(StrEnum):
    """Why a running job is stopped for another."""

    PREEMPT = "preempt"  # a higher-priority job
    RECLAIM = "reclaim"  # its tenant borrowed what the owner now wants back
    DEFRAGMENT = "defragment"  # moved so that a waiting job gets room (it restarts elsewhere)
    RESERVATION = "reservation"  # on a reservation's nodes when its window began, not its owner's


class Protection(StrEnum):
    """Where a stopped job stood against its minimum run time (``scheduler/min_runtime.py``)."""

    NONE = "none"  # it has none, or ran past it
    # within it: nothing else freed the cards for a claim within its guarantee that had
    # waited past the bound
    WAIVED = "waived"

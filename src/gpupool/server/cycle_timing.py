"""Where a leader's last scheduling cycle spent its time."""

from dataclasses import dataclass


@dataclass(frozen=True)
class CycleTiming:
    """Where the last cycle's time went (the leader's own clock; ``gpupool bench cycle
    --server`` reads it)."""

    snapshot_s: float  # inputs read from the database (nodes, live work, queue, tenants)
    decide_s: float  # the engine and the steps on its result before the commit
    commit_s: float  # the fenced write of the decisions
    pending: int
    running: int
    admitted: int
    preempted: int

    @property
    def total_s(self) -> float:
        return self.snapshot_s + self.decide_s + self.commit_s

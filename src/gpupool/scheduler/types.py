"""Results of placement: what a job was granted, or why it was not."""

from dataclasses import dataclass

from gpupool.model import Job


@dataclass(frozen=True, slots=True)
class DeviceGrant:
    """One device (or MIG instance) granted to a job. ``compute_pct`` 100 + ``exclusive`` is a
    whole card; a MIG grant names its profile and start position."""

    node: str
    device: int
    compute_pct: int
    mem_mib: int
    exclusive: bool = False
    mig_profile: str | None = None
    mig_start: int | None = None


@dataclass(frozen=True, slots=True)
class NodeGrant:
    """CPU and memory a job takes on one node, with the devices it takes there."""

    node: str
    cpu_millis: int
    mem_mib: int
    devices: tuple[DeviceGrant, ...]
    whole: bool = False  # the whole node (node=whole): nothing else is placed there meanwhile


@dataclass(frozen=True, slots=True)
class Placement:
    job_id: str
    nodes: tuple[NodeGrant, ...]
    policy: str

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.node for n in self.nodes)

    @property
    def devices(self) -> tuple[DeviceGrant, ...]:
        return tuple(d for n in self.nodes for d in n.devices)

    @property
    def card_percent(self) -> int:
        """How much of the cards it holds, in percent of a card: a whole card counts 100,
        a share its compute percent (what the simulator's utilisation adds up)."""
        return sum(100 if d.exclusive else d.compute_pct for d in self.devices)


@dataclass(frozen=True, slots=True)
class Unplaceable:
    """A job that fits nowhere now, with the aggregated reason (DESIGN.md invariant 5)."""

    job_id: str
    reason: str
    counts: tuple[tuple[str, int], ...] = ()


PlacementResult = Placement | Unplaceable


@dataclass(frozen=True, slots=True)
class RunningJob:
    job: Job
    placement: Placement
    start_time: float
    borrowed: bool = False  # admitted above its tenant's guarantee: reclaimable
    checkpointed_at: float | None = None  # its job's last checkpoint its agent passed on

    @property
    def expected_end(self) -> float:
        m = self.job.max_runtime_s
        return float("inf") if m is None else self.start_time + m

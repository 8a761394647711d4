"""Jobs as the scheduler sees them: who asks, for what, how urgently."""

from dataclasses import dataclass
from enum import StrEnum

from gpupool.model.errors import SpecError
from gpupool.model.request import ResourceRequest, parse_request


class JobKind(StrEnum):
    TRAINING = "training"
    INFERENCE = "inference"
    DEV = "dev"
    BATCH = "batch"


DEFAULT_PRIORITY_CLASSES: dict[str, int] = {
    "online-inference": 1000,
    "training": 500,
    "dev-test": 100,
}
# the class a job gets when it names none: online work outranks training, dev work yields
CLASS_OF_KIND: dict[str, str] = {
    "inference": "online-inference",
    "training": "training",
    "dev": "dev-test",
    "batch": "training",
}


def job_shape(request: str, gang_size: int) -> str:
    """What a job asks as people read it: a gang of 2 workers of 4 cards is
    ``2×gpu=A100-80G:4`` (its request alone reads as one worker's, and a quota reason about 8
    cards looked false beside it)."""
    return f"{gang_size}×{request}" if gang_size > 1 else request


@dataclass(frozen=True, slots=True)
class Job:
    """A unit of work to place. ``gang_size`` workers each need ``request``."""

    id: str
    request: ResourceRequest
    tenant: str = "default"
    kind: JobKind = JobKind.BATCH
    priority_class: str = "training"
    priority: int = 0
    gang_size: int = 1
    max_runtime_s: int | None = None
    submit_time: float = 0.0
    on_preempt: str = "suspend"  # suspend: requeued keeping its place; kill: stopped
    # the only nodes it may use (a pod's node selector, affinity and tolerations); None: any
    nodes: frozenset[str] | None = None
    nodes_why: str = ""  # why the others are not allowed, when not the default words
    one_per_node: bool = False  # its gang's workers on distinct nodes (sbatch -N)
    # sbatch -w/--nodelist: it holds each of these nodes (one worker each, the first ones),
    # its other workers anywhere; -x/--exclude: never these
    required_nodes: tuple[str, ...] = ()
    excluded_nodes: frozenset[str] = frozenset()
    # it saves its work on a signal within this many seconds (None: it does not say so)
    checkpoint_grace_s: int | None = None
    policy: str | None = None  # its placement policy under the server's auto (None: by kind)

    def __post_init__(self) -> None:
        if not self.id:
            raise SpecError("job: id must not be empty", field="id")
        if self.gang_size < 1:
            raise SpecError(f"job {self.id}: gang_size must be at least 1", field="gang_size")
        if self.on_preempt not in ("suspend", "kill"):
            raise SpecError(
                f"job {self.id}: on_preempt must be suspend or kill, not {self.on_preempt!r}",
                field="on_preempt",
            )
        if len(self.required_nodes) > self.gang_size:
            raise SpecError(
                f"job {self.id}: names {len(self.required_nodes)} nodes for "
                f"{self.gang_size} worker(s)",
                field="nodelist",
            )
        if self.max_runtime_s is not None and self.max_runtime_s <= 0:
            raise SpecError(f"job {self.id}: max_runtime_s must be positive", field="max_runtime_s")


def job(job_id: str, spec: str, **fields: object) -> Job:
    """Shorthand used by tests, examples and the CLI: ``job("j1", "gpu=2", tenant="a")``."""
    return Job(id=job_id, request=parse_request(spec), **fields)  # type: ignore[arg-type]

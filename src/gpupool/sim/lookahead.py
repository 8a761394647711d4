"""FGD with look-ahead over the next arrivals: gpupool's policy for the FGD protocol.

FGD is greedy: it picks the placement that least increases fragmentation now. Here FGD's
choice and best-fit's are both tried; after each, the next ``depth`` arrivals are placed with
FGD on a scratch copy of the decision (applied, then rolled back), and the candidate that leaves
the cluster least fragmented wins — GPU the next pods could not get at all counts as
fragmented too. A batch scheduler sees its queue, so the next arrivals are fair to use; the
pods are still scheduled once, in order, and never move.
"""

from collections.abc import Sequence

from gpupool.model import Job, ResourceRequest
from gpupool.scheduler import ClusterState, Placement, Placer
from gpupool.scheduler.fragmentation import FragmentationModel
from gpupool.scheduler.types import PlacementResult

DEPTH = 4


class LookAhead:
    def __init__(
        self,
        primary: Placer,
        alternatives: Sequence[Placer],
        measure: FragmentationModel,
        depth: int = DEPTH,
    ):
        self.primary = primary
        self.alternatives = list(alternatives)
        self.measure = measure
        self.depth = depth

    def place(
        self,
        state: ClusterState,
        job: Job,
        upcoming: Sequence[tuple[ResourceRequest, int]],
    ) -> PlacementResult:
        """The placement for ``job``; ``upcoming`` are the next arrivals as (request, milli-GPU
        asked). The snapshot is left as it was."""
        first = self.primary.place(state, job, explain=False)
        if not isinstance(first, Placement) or self.depth == 0:
            return first
        candidates = [first]
        for alternative in self.alternatives:
            other = alternative.place(state, job, explain=False)
            if isinstance(other, Placement) and other.nodes != first.nodes:
                candidates.append(other)
        if len(candidates) == 1:
            return first
        scored = [(self._after(state, c, upcoming), k) for k, c in enumerate(candidates)]
        return candidates[min(scored)[1]]

    def _after(
        self,
        state: ClusterState,
        candidate: Placement,
        upcoming: Sequence[tuple[ResourceRequest, int]],
    ) -> float:
        """Fragmentation (milli-GPU) after ``candidate`` and the next arrivals, plus what
        those arrivals could not get."""
        state.apply(candidate)
        placed = [candidate.job_id]
        unplaced = 0
        for j, (request, milli) in enumerate(upcoming[: self.depth]):
            result = self.primary.place(
                state, Job(id=f"~ahead-{j}", request=request), explain=False
            )
            if isinstance(result, Placement):
                state.apply(result)
                placed.append(result.job_id)
            else:
                unplaced += milli
        score = self.measure.cluster_fragmentation() * 10 + unplaced
        for job_id in reversed(placed):
            state.release(job_id)
        return score

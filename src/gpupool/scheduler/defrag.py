"""Defragmentation (pure): a short list of moves that frees room for a waiting job on one
node, when enough capacity is free in the pool but scattered — across nodes, across a node's
NVLink islands, or as fractional shares spread over a node's cards.

A move suspends a running job that allows it and restarts it on free capacity elsewhere —
another node, or the same node's other cards (shares re-packed onto fewer cards, a job moved
off the island the waiting job needs) — and the plan is only offered when every moved job fits
once the waiting job has its room, so nothing is pushed out of the pool. Among the nodes where
that works, the plan that moves the fewest jobs wins, then the one that loses the least
progress (cards x seconds run since their start: a suspended job resumes from its last
checkpoint at best), then the lowest node.

The caller decides which jobs may move (``Movable``) and how a job is placed on a node mask
(``Place``: the scheduler's own placer with the job's reservations, or a simulator's).
"""

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from gpupool.model import Job
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.types import Placement

Place = Callable[[ClusterState, Job, np.ndarray], Placement | None]


@dataclass(frozen=True, slots=True)
class Movable:
    """A running job that may be moved, where it runs, and since when."""

    job: Job
    placement: Placement
    started: float
    cards: int = field(init=False, default=0)  # devices it holds (counted once)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cards", len(self.placement.devices))


def by_row(state: ClusterState, movable: Iterable[Movable]) -> dict[int, list[Movable]]:
    """The movable single-node jobs that hold devices, by the snapshot row of their node
    (what ``plan_defrag`` plans over; build it once for many plans)."""
    out: dict[int, list[Movable]] = {}
    for m in movable:
        rows = {state.index[n.node] for n in m.placement.nodes}
        if len(rows) == 1 and m.cards and m.job.id in state.placements:
            out.setdefault(rows.pop(), []).append(m)
    return out


@dataclass(frozen=True, slots=True)
class Move:
    job_id: str
    source: str  # the node it leaves
    target: Placement  # where it fits once the plan is applied
    cards: int

    def targets(self) -> str:
        return "+".join(dict.fromkeys(self.target.node_names))

    def route(self) -> str:
        """``from n0 to n3``, or ``to other cards of n0`` when it stays on its node."""
        if self.targets() == self.source:
            return f"to other cards of {self.source}"
        return f"from {self.source} to {self.targets()}"


@dataclass(frozen=True, slots=True)
class DefragPlan:
    job_id: str  # the waiting job
    node: str  # where room is made for it
    placement: Placement  # the waiting job's placement once the moves are done
    moves: tuple[Move, ...]
    lost_card_s: float  # progress the moved jobs lose at worst (cards x seconds run)

    def describe(self, copied: Collection[str] = ()) -> str:
        """``defragmenting: moving job 812 from node-03 to node-07 to free 4 cards on
        node-03`` (the waiting job's reason while the moved jobs stop); ``copied`` jobs are
        replicas whose copy starts first (``starting a copy of job 7 on node-07``)."""
        copies = [f"job {m.job_id} on {m.targets()}" for m in self.moves if m.job_id in copied]
        moved = [f"job {m.job_id} {m.route()}" for m in self.moves if m.job_id not in copied]
        parts = []
        if len(copies) == 1:
            parts.append(f"starting a copy of {copies[0]} before it stops")
        elif copies:
            parts.append(f"starting copies of {', '.join(copies)} before they stop")
        if moved:
            parts.append(f"moving {', '.join(moved)}")
        return f"defragmenting: {' and '.join(parts)} to free {self.room()} on {self.node}"

    def room(self) -> str:
        cards = len(self.placement.devices)
        return "1 card" if cards == 1 else f"{cards} cards"


def plan_defrag(
    state: ClusterState,
    job: Job,
    movable: Sequence[Movable] | Mapping[int, list[Movable]],
    place: Place,
    now: float,
    *,
    max_moves: int = 4,
    max_nodes: int = 8,
) -> DefragPlan | None:
    """The cheapest plan that makes room for ``job`` (one worker) on one node, moving at most
    ``max_moves`` single-node jobs, trying the ``max_nodes`` most promising nodes; None when
    there is none (``state`` is left as it was). ``movable``: the jobs, or ``by_row`` of
    them."""
    if job.gang_size != 1 or max_moves < 1:
        return None
    on_row = movable if isinstance(movable, Mapping) else by_row(state, movable)
    need = (job.request.gpu_count or 1) if job.request.kind.value == "whole" else 1
    free = state.idle.sum(axis=1)
    open_rows = ~state.closed
    candidates = [
        r
        for r, ms in on_row.items()
        if ms and open_rows[r] and free[r] + sum(m.cards for m in ms) >= need
    ]
    # the nodes with the most free cards need the fewest moves
    candidates.sort(key=lambda r: (-int(free[r]), r))
    best: DefragPlan | None = None
    trial = state.clone() if candidates else state  # one copy, each node's trial undone
    for row in candidates[:max_nodes]:
        undo = _Undo(trial)
        try:
            plan = _plan_on(undo, job, row, on_row[row], place, now, max_moves)
        finally:
            undo.rollback()
        if plan is not None and (best is None or _cost(plan) < _cost(best)):
            best = plan
    return best


class _Undo:
    """Applies and releases on a trial snapshot, and puts it back as it was."""

    def __init__(self, state: ClusterState):
        self.state = state
        self.log: list[tuple[bool, Placement]] = []  # (applied?, placement)

    def apply(self, p: Placement) -> None:
        self.state.apply(p)
        self.log.append((True, p))

    def release(self, job_id: str) -> None:
        p = self.state.placements[job_id]
        self.state.release(job_id)
        self.log.append((False, p))

    def rollback(self) -> None:
        for applied, p in reversed(self.log):
            if applied:
                self.state.release(p.job_id)
            else:
                self.state.apply(p)
        self.log.clear()


def _cost(plan: DefragPlan) -> tuple[int, float, str]:
    return (len(plan.moves), plan.lost_card_s, plan.node)


def _plan_on(
    trial: _Undo,
    job: Job,
    row: int,
    here: list[Movable],
    place: Place,
    now: float,
    max_moves: int,
) -> DefragPlan | None:
    state = trial.state
    only = np.zeros(state.size, dtype=bool)
    only[row] = True
    # the least progress lost first; bigger jobs first at equal progress (fewer moves)
    order = sorted(here, key=lambda m: (_lost(m, now), -m.cards, m.job.id))
    chosen: list[Movable] = []
    placement = None
    for m in order:
        if len(chosen) == max_moves:
            return None
        trial.release(m.job.id)
        chosen.append(m)
        placement = place(state, job, only)
        if placement is not None:
            break
    if placement is None:
        return None
    for m in sorted(chosen[:-1], key=lambda m: -_lost(m, now)):  # keep what is not needed
        trial.apply(m.placement)
        again = place(state, job, only)
        if again is None:
            trial.release(m.job.id)
        else:
            chosen.remove(m)
            placement = again
    trial.apply(placement)
    # anywhere, this node included: shares re-packed onto its other cards, a job moved to
    # another NVLink island of the node, free room on other nodes
    anywhere = np.ones(state.size, dtype=bool)
    moves = []
    for m in sorted(chosen, key=lambda m: (-m.cards, m.job.id)):
        target = place(state, m.job, anywhere)
        if target is None:
            return None
        trial.apply(target)
        moves.append(Move(m.job.id, state.nodes[row].name, target, m.cards))
    lost = sum(_lost(m, now) for m in chosen)
    return DefragPlan(job.id, state.nodes[row].name, placement, tuple(moves), lost)


def _lost(m: Movable, now: float) -> float:
    return m.cards * max(0.0, now - m.started)

"""A reservation's window begins: the work on its nodes that is not its owner's leaves.

Before the window, preemptible work of others may use the reserved nodes, and online work
where no other node has room (``reservations.fence``). Once it begins:

- ``move_replicas`` (first in the cycle, so that no job placed in the same cycle takes the
  room) starts a copy elsewhere of each online job of others on its nodes — a service's
  replica — make-before-break: the job keeps running until its copy runs (a replica: until
  its copy is ready; the server ends it then), so the service never loses its place. A job
  whose copy is starting is left alone. One with no room elsewhere is stopped by ``reserve``
  saying so.
- ``reserve`` (last in the cycle, so that the room is given in the next one, once they
  stopped) stops the rest — requeued, or killed by its ``on_preempt``. A reservation of N
  cards stops only as many, most recently started first, as its hold needs, counting the
  cards of replicas being copied as freed.
"""

from gpupool.scheduler.reasons import Cause, Reason
from gpupool.scheduler.reservations import Reservation, iso, moved_by_copy, owned
from gpupool.scheduler.session import Session
from gpupool.scheduler.types import RunningJob


def _began(r: Reservation) -> str:
    held = f"{r.cards} cards of " if r.cards is not None else ""
    return f"its window began at {iso(r.start)} on {held}{', '.join(sorted(r.nodes))}"


def _others(cy: Session, r: Reservation) -> list[RunningJob]:
    """Others' work on ``r``'s nodes, the last started first (the least work lost)."""
    nodes = set(r.nodes)
    return sorted(
        (
            v
            for v in cy.running.values()
            if nodes & set(v.placement.node_names) and not owned(r, cy.tree.chain[v.job.tenant])
        ),
        key=lambda v: (-v.start_time, v.job.id),
    )


def _short(cy: Session, r: Reservation, leaving: set[str]) -> set[str]:
    """A hold of cards: its nodes where it is short, counting the cards of ``leaving`` jobs
    (replicas being copied) as freed; whole nodes: every node."""
    if r.cards is None:
        return set(r.nodes)
    room = dict(cy.hold_room(r))
    for job_id in leaving:
        v = cy.running.get(job_id)
        if v is not None:
            for ng in v.placement.nodes:
                if ng.node in room:
                    room[ng.node] += len(ng.devices)
    return {n for n, left in room.items() if left < 0}


def _leaving(cy: Session) -> set[str]:
    """Replicas whose copy starts (this cycle or earlier): they stop once it runs."""
    return set(cy.config.replacing) | {c.job_id for c in cy.result.replacements}


def move_replicas(cy: Session) -> dict[str, Reason]:
    """Copy elsewhere the online work of others on the nodes of reservations whose window is
    on; returns why each job with nowhere to go could not be copied (``reserve`` says it)."""
    homeless: dict[str, Reason] = {}
    if not cy.config.copy_for_reservations:
        return homeless
    for r in cy.reservations:
        if not r.start <= cy.now < r.end:
            continue
        for victim in _others(cy, r):
            job = victim.job
            leaving = _leaving(cy)
            if job.id in leaving or not moved_by_copy(job):
                continue
            if not _short(cy, r, leaving) & set(victim.placement.node_names):
                continue
            target = cy.try_place(job)  # its fence keeps it off r's nodes: r is on
            if isinstance(target, Reason):
                homeless[job.id] = target
                continue
            why = (
                f"moved for reservation {r.id} of {r.tenant}: {_began(r)}; a copy starts on "
                f"{'+'.join(dict.fromkeys(target.node_names))} and this one stops once it runs"
            )
            by = f"reservation {r.id} of {r.tenant}"
            cy.replace(victim, target, by, why, Cause.RESERVATION, r.id)
    return homeless


def reserve(cy: Session, homeless: dict[str, Reason]) -> None:
    """Stop others' work still on the nodes of reservations whose window is on (but the
    replicas being copied)."""
    for r in cy.reservations:
        if not r.start <= cy.now < r.end:
            continue
        for victim in _others(cy, r):
            leaving = _leaving(cy)
            if victim.job.id in leaving:
                continue  # its copy starts: it stops once the copy runs
            if not _short(cy, r, leaving) & set(victim.placement.node_names):
                continue
            why = _began(r)
            if victim.job.id in homeless:
                why += f"; no room elsewhere for a copy: {homeless[victim.job.id]}"
            cy.stop(victim, f"reservation {r.id} of {r.tenant}", why, Cause.RESERVATION, r.id)

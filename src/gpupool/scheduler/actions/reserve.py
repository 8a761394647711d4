"""A reservation's window begins: the work on its nodes that is not its owner's stops.

Before the window, preemptible work of others may use the reserved nodes
(``reservations.node_mask``); once it begins, each such job still running there is stopped —
requeued, or killed by its ``on_preempt`` — so that the owner gets the nodes it reserved. A
reservation of N cards stops only as many, most recently started first, as its hold needs.
Run last in the cycle, so that the room is given in the next one, once they have stopped.
"""

from gpupool.scheduler.reasons import Cause
from gpupool.scheduler.reservations import iso, owned
from gpupool.scheduler.session import Session


def reserve(cy: Session) -> None:
    for r in cy.reservations:
        if not r.start <= cy.now < r.end:
            continue
        nodes = set(r.nodes)
        others = [
            v
            for v in cy.running.values()
            if nodes & set(v.placement.node_names) and not owned(r, cy.tree.chain[v.job.tenant])
        ]
        held = f"{r.cards} cards of " if r.cards is not None else ""
        why = f"its window began at {iso(r.start)} on {held}{', '.join(sorted(nodes))}"
        # the last started first: the least work lost; a hold of cards only where it is short
        for victim in sorted(others, key=lambda v: (-v.start_time, v.job.id)):
            if r.cards is not None:
                short = {n for n, room in cy.hold_room(r).items() if room < 0}
                if not short & set(victim.placement.node_names):
                    continue
            cy.stop(victim, f"reservation {r.id} of {r.tenant}", why, Cause.RESERVATION)

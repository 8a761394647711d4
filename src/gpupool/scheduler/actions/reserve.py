"""A reservation's window begins: the work on its nodes that is not its owner's stops.

Before the window, preemptible work of others may use the reserved nodes
(``reservations.node_mask``); once it begins, each such job still running there is stopped —
requeued, or killed by its ``on_preempt`` — so that the owner gets the nodes it reserved.
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
        for victim in list(cy.running.values()):
            if not nodes & set(victim.placement.node_names):
                continue
            if owned(r, cy.tree.chain[victim.job.tenant]):
                continue
            why = f"its window began at {iso(r.start)} on {', '.join(sorted(nodes))}"
            cy.stop(victim, f"reservation {r.id} of {r.tenant}", why, Cause.RESERVATION)

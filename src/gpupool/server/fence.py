"""The leader's fence for every write a duty makes: inside the write, the lead's row is read
and locked, and the write goes on only if this process's epoch still leads — so a server that
lost the lead (a fail-over it has not noticed yet) writes nothing, and a takeover waits for a
fenced write under way to commit before it counts as leading. ``commit_cycle`` fences the
scheduling cycle the same way (moving the generation)."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.commit import LostLeadership
from gpupool.server.db.tables import Meta


def hold_lead(session: Session, epoch: int | None) -> None:
    """Raise ``LostLeadership`` unless ``epoch`` leads now; holds the lead's row to the end
    of this write (PostgreSQL; SQLite's writes are one at a time anyway)."""
    if epoch is None:
        raise LostLeadership("not the leader")
    leader = session.execute(
        select(Meta.leader_epoch).where(Meta.id == 1).with_for_update()
    ).scalar_one()
    if leader != epoch:
        raise LostLeadership(f"epoch {epoch} is no longer the leader's")

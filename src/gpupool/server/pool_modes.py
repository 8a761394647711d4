"""A pool's sharing mode reaches its cards. In a ``share`` pool every card that is not
MIG-partitioned is shared at once — in the state of record, a running whole-card job keeps
its card exclusively until it ends, the card then takes sharers — and a MIG card is ordered
out of MIG mode (``want_mode``) as soon as nothing runs on it, which its agent carries out."""

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.model import SharingMode
from gpupool.server.db.tables import AuditRow, DeviceRow, NodeRow, Pool
from gpupool.server.lifecycle import bump_nodes_version
from gpupool.sharing.hybrid import ModeChange
from gpupool.sharing.mig import table_for


@dataclass(frozen=True)
class PoolChange:
    now: int  # cards shared from now on
    when_idle: int  # MIG cards that switch once nothing runs on them (hybrid: in MIG)

    def note(self, sharing: str) -> str:
        if sharing == "hybrid" and self.now + self.when_idle:
            return (
                f"{self.now} card(s) shared now, {self.when_idle} in MIG; the pool switches "
                "them between sharing and MIG by demand"
            )
        if sharing != "share":
            return ""
        later = f"; {self.when_idle} MIG card(s) switch once idle" if self.when_idle else ""
        return f"{self.now} card(s) shareable now{later}"


def shares(sharing: str, model: str) -> bool:
    """Whether a pool's whole card of ``model`` is a shared card there: every card of a share
    pool, a hybrid pool's MIG-capable ones (which it switches between sharing and MIG)."""
    return sharing == "share" or (sharing == "hybrid" and table_for(model) is not None)


def _cards(s: Session, pool: str) -> list[DeviceRow]:
    return list(
        s.execute(
            select(DeviceRow)
            .join(NodeRow, NodeRow.name == DeviceRow.node)
            .where(NodeRow.pool == pool)
        ).scalars()
    )


def follow_pool_mode(s: Session, pool: Pool) -> PoolChange:
    """After a pool's sharing changed: what it changed on its cards now and what later. A
    hybrid pool's whole MIG-capable cards become shared cards (as a node registering into
    one has them), which the pool then switches between sharing and MIG by demand: made
    hybrid, a pool of whole cards switched nothing (only cards already cut were considered)."""
    bump_nodes_version(s)  # what can ever run there changed with the pool (PoolCapacity)
    if pool.sharing not in ("share", "hybrid"):
        return PoolChange(0, 0)
    now = later = 0
    for d in _cards(s, pool.name):
        if not shares(pool.sharing, d.model):
            continue  # not MIG-capable: a hybrid pool keeps it whole
        if d.mode == "whole":
            d.mode = "share"
            now += 1
        elif d.mode == "share":
            now += 1
        elif d.mode == "mig":
            later += 1
    return PoolChange(now, later)


def order_out_of_mig(
    s: Session,
    when: float,
    pools: list[str],
    held: set[tuple[str, int]],
    switchable: Callable[[DeviceRow], bool],
) -> list[ModeChange]:
    """Each cycle: the share ``pools``' idle MIG cards (not in ``held``) are ordered into
    sharing (audited)."""
    ordered = []
    for pool in pools:
        for d in _cards(s, pool):
            if d.mode != "mig" or d.want_mode is not None or (d.node, d.index) in held:
                continue
            if not switchable(d):
                continue
            d.want_mode, d.want_since = "share", when
            s.add(
                AuditRow(time=when, actor="scheduler", role="", action="MODE switch",
                         target=f"{d.node} device {d.index} -> share (pool {pool} is a share "
                                "pool)", result=200, client="", detail="")
            )  # fmt: skip
            ordered.append(ModeChange(d.node, d.index, SharingMode.SHARE, "share pool"))
    return ordered

"""Hybrid pools (pure): which MIG-capable cards are cut into MIG instances and which are
shared, decided from demand within the admin's bounds.

A card changes mode only while nothing runs on it (switching MIG mode needs the card free of
work: its instances are destroyed, and on some cards it waits for a GPU reset), one card a
pool a cycle, so the pool follows its queue without flapping: a MIG request that waits for
room turns an idle shared card into a MIG card while the pool has fewer than ``mig_max``; a
share or whole-card request that waits turns an idle MIG card back while it has more than
``mig_min``. The
bounds themselves are kept first (an admin who raises ``mig_min`` gets MIG cards as they fall
idle). Cards that cannot do MIG are left as they are.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from gpupool.model import SharingMode, SpecError
from gpupool.sharing.mig import MigTable, table_for


@dataclass(frozen=True, slots=True)
class HybridCard:
    node: str
    index: int
    model: str
    mode: SharingMode  # as the agent reported it
    idle: bool  # no allocation holds any part of it
    want: SharingMode | None = None  # a switch already ordered and not done yet

    @property
    def effective(self) -> SharingMode:
        return self.want or self.mode


@dataclass(frozen=True, slots=True)
class HybridBounds:
    """How many of a hybrid pool's MIG-capable cards may be MIG cards (None: all of them)."""

    mig_min: int = 0
    mig_max: int | None = None

    def __post_init__(self) -> None:
        if self.mig_min < 0 or (self.mig_max is not None and self.mig_max < 0):
            raise SpecError("pool: mig_cards_min and mig_cards_max must not be negative")
        if self.mig_max is not None and self.mig_min > self.mig_max:
            raise SpecError(
                f"pool: mig_cards_min {self.mig_min} is above mig_cards_max {self.mig_max}",
                field="mig_cards_min",
            )


@dataclass(frozen=True, slots=True)
class ModeChange:
    node: str
    index: int
    mode: SharingMode
    why: str


def plan_modes(
    cards: Sequence[HybridCard], bounds: HybridBounds, waiting_mig: int, waiting_other: int
) -> list[ModeChange]:
    """The switches to order now for one hybrid pool. ``waiting_mig``: MIG requests that wait
    for room (not for quota); ``waiting_other``: requests for shares or whole cards that do."""
    # NVIDIA MIG cards only: switching an Ascend chip in and out of vNPU mode is not built
    capable = [c for c in cards if isinstance(table_for(c.model), MigTable)]
    mig = sum(c.effective is SharingMode.MIG for c in capable)
    high = len(capable) if bounds.mig_max is None else min(bounds.mig_max, len(capable))
    low = min(bounds.mig_min, high)

    def switch(to: SharingMode, count: int, why: str) -> list[ModeChange]:
        free = [c for c in capable if c.idle and c.want is None and c.effective is not to]
        free.sort(key=lambda c: (c.node, c.index))
        return [ModeChange(c.node, c.index, to, why) for c in free[:count]]

    if mig < low:
        return switch(SharingMode.MIG, low - mig, f"the pool keeps at least {low} MIG cards")
    if mig > high:
        return switch(SharingMode.SHARE, mig - high, f"the pool keeps at most {high} MIG cards")
    if waiting_mig and mig < high:
        return switch(SharingMode.MIG, 1, f"{waiting_mig} MIG requests wait for room")
    if waiting_other and mig > low:
        why = f"{waiting_other} share or whole-card requests wait for room"
        return switch(SharingMode.SHARE, 1, why)
    return []

"""Fractional sharing rules: how many tenants one card may hold and how much of it."""

from dataclasses import dataclass

from gpupool.model import SpecError


@dataclass(frozen=True, slots=True)
class SharePolicy:
    """Limits for ``share``-mode devices.

    ``headroom_pct`` of every shared card's memory is never handed out: virtualisation layers
    (MPS, HAMi-core, vNPU) and CUDA contexts need it; the seed advises 10-15%.
    Compute shares on one card add up to at most 100%.
    """

    headroom_pct: int = 10
    max_sharers: int = 8

    def __post_init__(self) -> None:
        if not 0 <= self.headroom_pct < 100:
            raise SpecError("share: headroom_pct must be in 0..99", field="headroom_pct")
        if self.max_sharers < 1:
            raise SpecError("share: max_sharers must be at least 1", field="max_sharers")

    def usable_mib(self, memory_mib: int) -> int:
        """Memory of a shared card that may be granted in total."""
        return memory_mib * (100 - self.headroom_pct) // 100

    def proportional_mib(self, memory_mib: int, share_pct: int) -> int:
        """Memory granted with a compute share that names no memory: the same fraction of
        the usable memory, so that shares adding up to 100% also fit in memory."""
        return self.usable_mib(memory_mib) * share_pct // 100

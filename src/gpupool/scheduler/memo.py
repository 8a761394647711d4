"""Asks that fitted nowhere, remembered until the snapshot releases capacity: identical
asks behind a refused one cost nothing. One memo for the cycle and every replay loop of the
simulator (where pods never leave, nothing is ever forgotten)."""

from collections.abc import Hashable

from gpupool.scheduler.state import ClusterState


class RefusedAsks:
    def __init__(self, state: ClusterState):
        self.state = state
        self._at: dict[Hashable, tuple[int, object]] = {}  # ask -> (releases then, detail)

    def refused(self, ask: Hashable) -> bool:
        """Refused since the last release of capacity."""
        seen = self._at.get(ask)
        return seen is not None and seen[0] == self.state.releases

    def detail(self, ask: Hashable) -> object:
        """What was remembered with the refusal (e.g. its reason)."""
        return self._at[ask][1]

    def add(self, ask: Hashable, detail: object = None) -> None:
        self._at[ask] = (self.state.releases, detail)

"""Fair share's past, read from the metered usage records (docs/fair-share-and-estimates.md).

A tenant's usage is the decayed card-hours of its usage records: ``compute_pct_seconds / 100``
card-seconds spread over ``[start, end]``, each second aged by ``2^(-age/H)``
(``scheduler.fairshare.decayed_card_hours``). Fair share counts only the records of
allocations admitted as *borrowed*; all of them are shown (sshare's ``used``). Records older
than ``FORGET_HALF_LIVES`` half-lives weigh under 1/1024 and are not read. What a live
allocation ran since its last metering checkpoint (at most an hour) is not in the records: the
engine counts present borrowing over one mean life instead (``FairShare``).

The leader reads the records at most every ``REFRESH_S`` and ages its sums to each cycle's
time in between (a sum of decayed terms decays as one), so a cycle reads nothing new.
"""

import math
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.scheduler.fairshare import HOUR, UsageHistory, decayed_card_hours
from gpupool.server.db.tables import AllocationRow, UsageRow

FORGET_HALF_LIVES = 10
REFRESH_S = 60.0


def read_history(session: Session, now: float, half_life_s: float) -> UsageHistory:
    """Every tenant's decayed card-hours as of ``now``: borrowed and all (its own jobs)."""
    since = now - FORGET_HALF_LIVES * half_life_s
    usage, allocs = UsageRow.__table__.c, AllocationRow.__table__.c
    rows = session.execute(
        select(usage.tenant, usage.start, usage.end, usage.compute_pct_seconds, allocs.borrowed)
        .join_from(UsageRow.__table__, AllocationRow.__table__, allocs.id == usage.allocation_id)
        .where(usage.end > since, usage.compute_pct_seconds > 0)
    ).all()
    borrowed: dict[str, float] = {}
    used: dict[str, float] = {}
    for tenant, start, end, pct_s, was_borrowed in rows:
        hours = decayed_card_hours(pct_s / 100.0, start, end, now, half_life_s)
        used[tenant] = used.get(tenant, 0.0) + hours
        if was_borrowed:
            borrowed[tenant] = borrowed.get(tenant, 0.0) + hours
    return UsageHistory(half_life_s, borrowed, used)


def aged(history: UsageHistory, seconds: float) -> UsageHistory:
    """``history`` ``seconds`` later, with nothing added."""
    factor = math.pow(2.0, -max(0.0, seconds) / history.half_life_s)
    return UsageHistory(
        history.half_life_s,
        {t: u * factor for t, u in history.borrowed.items()},
        {t: u * factor for t, u in history.used.items()},
    )


@dataclass
class HistoryCache:
    """The leader's copy: read again every ``refresh_s`` or when the half-life changed."""

    refresh_s: float = REFRESH_S
    _read_at: float = -math.inf
    _history: UsageHistory | None = None

    def history(self, session: Session, now: float, half_life_h: float) -> UsageHistory | None:
        """The usage history for a cycle at ``now`` (None: fair share over time is off)."""
        if half_life_h <= 0:
            self._history = None
            return None
        half_life_s = half_life_h * HOUR
        stale = self._history is None or self._history.half_life_s != half_life_s
        if stale or not 0 <= now - self._read_at < self.refresh_s:
            self._history = read_history(session, now, half_life_s)
            self._read_at = now
            return self._history
        assert self._history is not None
        return aged(self._history, now - self._read_at)

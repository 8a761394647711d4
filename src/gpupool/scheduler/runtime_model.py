"""How long a job will run (pure): its time limit, or what the same team's similar jobs ran.

Users' time limits are upper bounds, rarely expectations (Slurm users round up to the hour or
take the site default; Tsafrir, Etsion and Feitelson, "Backfilling using system-generated
predictions rather than user runtime estimates", IEEE TPDS 2007, predict from the user's own
recent jobs and cap the prediction by the limit). So a job's expected run time is:

1. the run times of the most similar ended jobs of its own tenant — the first level with at
   least ``min_similar`` of them: same user, name (or command) and request; same user and
   request; same request (the team's) — the last ``recent`` of them, their ``quantile``
   (the median by default): ``history of N similar jobs``. A running job that has already
   run ``x`` seconds is expected to run the quantile of those of them that ran longer than
   ``x`` (its residual life: run times are heavy-tailed, so a job that ran long is likely to
   run longer still);
2. capped by its time limit where it has one (a job never runs past it);
3. without history: its time limit (``time limit``); without either: the site's default
   (``site default``), or unknown (None: it is not expected to end within any plan).

A job that has run longer than every similar one, or past what was expected otherwise, is
expected to run as long again as it has run (at most to its limit): ``remaining``.
"""

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

LIMIT = "time limit"
DEFAULT = "site default"
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Expected:
    """A run time in seconds (None: unknown), and where it comes from (``basis``); ``similar``
    jobs when it comes from history."""

    seconds: float | None
    basis: str
    similar: int = 0

    def words(self) -> str:
        if self.similar:
            return f"history of {self.similar} similar job{'s' if self.similar != 1 else ''}"
        return {LIMIT: "time limits", DEFAULT: "the site default run time"}.get(
            self.basis, self.basis
        )


@dataclass(frozen=True, slots=True)
class Ended:
    """One ended job of a tenant's history: who ran what, and for how long."""

    tenant: str
    user: str
    name: str  # its name, or its command when it has none
    request: str  # the canonical request
    run_s: float
    limit_s: float | None = None  # its time limit


@dataclass(frozen=True, slots=True)
class RuntimeModel:
    """``recent``: ended jobs kept per similarity key (the latest); ``min_similar``: how many a
    level needs to be used; ``quantile`` of their run times; ``by_limit``: at every level,
    those that also had the same time limit first."""

    recent: int = 20
    min_similar: int = 2
    quantile: float = 0.5
    by_limit: bool = False


class RuntimeHistory:
    """The ended jobs seen so far, per similarity key (added in the order they ended)."""

    def __init__(self, model: RuntimeModel | None = None, ended: Iterable[Ended] = ()):
        self.model = model or RuntimeModel()
        self._runs: dict[tuple[str, ...], deque[float]] = {}
        for e in ended:
            self.add(e)

    def keys(
        self, tenant: str, user: str, name: str, request: str, limit_s: float | None = None
    ) -> tuple[tuple[str, ...], ...]:
        """Most similar first: user + name + request, user + request, the team's request
        (with ``by_limit`` and a limit, each preceded by the same with the same limit)."""
        levels = (
            ("u+n+r", tenant, user, name, request),
            ("u+r", tenant, user, request),
            ("r", tenant, request),
        )
        if not self.model.by_limit or limit_s is None:
            return levels
        limit = f"{float(limit_s):g}"
        return tuple(k for level in levels for k in ((level[0] + "+l", *level[1:], limit), level))

    def add(self, e: Ended) -> None:
        for key in self.keys(e.tenant, e.user, e.name, e.request, e.limit_s):
            runs = self._runs.get(key)
            if runs is None:
                runs = self._runs[key] = deque(maxlen=self.model.recent)
            runs.append(e.run_s)

    def expect(
        self,
        tenant: str,
        user: str,
        name: str,
        request: str,
        limit_s: float | None,
        default_s: float | None = None,
        ran_s: float = 0.0,
    ) -> Expected:
        """The expected run time of a job of ``tenant`` (its time limit ``limit_s``) that has
        run ``ran_s`` seconds so far (0: not started)."""
        for key in self.keys(tenant, user, name, request, limit_s):
            runs = self._runs.get(key)
            if runs is not None and len(runs) >= self.model.min_similar:
                longer = [r for r in runs if r > ran_s] if ran_s > 0 else list(runs)
                if not longer:  # it ran longer than all of them: remaining() doubles it
                    return Expected(ran_s, key[0], len(runs))
                guess = quantile(longer, self.model.quantile)
                if limit_s is not None:
                    guess = min(guess, float(limit_s))
                return Expected(guess, key[0], len(runs))
        if limit_s is not None:
            return Expected(float(limit_s), LIMIT)
        if default_s is not None:
            return Expected(float(default_s), DEFAULT)
        return Expected(None, UNKNOWN)


def quantile(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile by linear interpolation between order statistics."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of nothing")
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def remaining(expected: Expected, ran_s: float, limit_s: float | None) -> float | None:
    """Seconds still to run for a job that ran ``ran_s``: what was expected less what it ran,
    or — past it — as long again as it ran (at most to its limit)."""
    if expected.seconds is None:
        return None
    left = expected.seconds - ran_s
    if left > 0:
        return left
    again = max(ran_s, 1.0)
    if limit_s is not None:
        again = min(again, max(float(limit_s) - ran_s, 1.0))
    return again

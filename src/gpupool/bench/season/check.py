"""The season's judge: pure functions over the workloads' records, the season's own log of
acknowledged submissions and the server's usage records. Each returns a ``Verdict``: held or
not, with the first counter-example in words, and the figures it measured."""

import itertools
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpupool.bench.season.records import Metered, Record, Submission
from gpupool.bench.season.workload import TICK_S

TERMINAL_OK = "succeeded"
STILL_GOING = ("pending", "admitted", "running", "held")


@dataclass(frozen=True)
class Verdict:
    held: bool
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"held": self.held, "detail": self.detail, **self.figures}


def nothing_lost_nothing_twice(
    submissions: Sequence[Submission], records: Sequence[Record], states: dict[int, str]
) -> Verdict:
    """Invariant 1. Lost: a key acknowledged as two jobs; a job the server no longer knows,
    ended other than succeeded, or says succeeded with no record of a whole run. Twice: two
    records of one key (or of one card) overlapping in time."""
    by_job = {s.job: s for s in submissions}
    done = {r.job for r in records if r.completed}
    still = 0
    for s in submissions:
        others = sorted({j for j in s.repeats if j != s.job})
        if others:
            return Verdict(False, f"{s.key}: one message sent twice made jobs {s.job} and {others}")
        state = states.get(s.job)
        if state in STILL_GOING:
            still += 1
        elif state != TERMINAL_OK:
            return Verdict(False, f"{s.key} (job {s.job}) acknowledged, then {state or 'gone'}")
        elif s.job not in done:
            return Verdict(False, f"{s.key} (job {s.job}) succeeded with no whole run recorded")
    strangers = sorted({r.job for r in records} - set(by_job))
    if strangers:
        return Verdict(False, f"job {strangers[0]} ran though the season never was told of it")
    overlap = _first_overlap(records, lambda r: [r.key])
    if overlap:
        return Verdict(False, f"ran twice at once: {overlap}")
    cards = _first_overlap(records, lambda r: [f"{r.node}/{g}" for g in r.gpus.split(",") if g])
    if cards:
        return Verdict(False, f"one card held by two workloads at once: {cards}")
    runs = len({(r.job, r.allocation) for r in records})
    blind = sum(1 for r in records if not r.gpus)
    unseen = f" ({blind} runs saw no card: not checked for cards)" if blind else ""
    return Verdict(
        True,
        f"{len(submissions)} acknowledged, {len(submissions) - still} ran to the end, "
        f"{still} still queued or running at the end; {runs} runs, none overlapping a run "
        f"of the same job or a holder of the same card{unseen}",
        {
            "acknowledged": len(submissions),
            "unfinished": still,
            "runs": runs,
            "runs_without_cards": blind,
        },
    )


def _first_overlap(records: Sequence[Record], keys: Callable[[Record], list[str]]) -> str | None:
    spans: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        for k in keys(r):
            spans[k].append(r)
    for k, rs in sorted(spans.items()):
        for a, b in itertools.pairwise(sorted(rs, key=lambda r: r.start)):
            if b.start < a.last:
                return (
                    f"{k}: job {a.job} allocation {a.allocation} pid {a.pid} on {a.node} "
                    f"{a.start:.3f}-{a.last:.3f} and job {b.job} allocation {b.allocation} "
                    f"pid {b.pid} on {b.node} from {b.start:.3f}"
                )
    return None


@dataclass(frozen=True)
class BillingTolerance:
    """How far a meter may stray from a workload's own record, in seconds, under the metering
    rule of docs/billing.md. ``start_s``: the meter may start this much before the workload's
    first line — it starts when the agent launches the shim (a Python process that then
    starts the command: 0.6-2.9 s on the 2-core machine under the season's load; billed,
    though the workload is not running yet: a known gap, reported as a figure). ``end_s``:
    a workload that ended by itself is billed to within this of its last line plus one tick,
    either way. ``stop_s``: a workload the server stopped (preempted, requeued) is billed to
    the release; it may run this much longer while the stop reaches it (not billed: the
    platform's time, not the tenant's), never be billed past its end."""

    start_s: float = 5.0
    end_s: float = 1.0
    stop_s: float = 10.0


def billing_matches_runs(
    records: Sequence[Record],
    usage: Sequence[Metered],
    unfinished: set[int],
    tolerance: BillingTolerance,
) -> Verdict:
    """Invariant 2, in card-seconds (prices not yet): per allocation, the meter starts no
    earlier than ``tolerance.start_s`` before the workload's first line (else it billed queued
    time) and not after it, ends within ``tolerance.end_s`` of its last line (or, stopped by
    the server, at most ``tolerance.stop_s`` before it), and covers the time between without
    gaps; a meter with no workload at all is billed time nobody ran — unless it is at most
    ``tolerance.start_s`` of an allocation released during the launcher's start-up (its job
    ran in another), counted and reported.
    Allocations of jobs still running at the end are left out (their meter is still open)."""
    ran: dict[int, tuple[float, float, int, str]] = {}
    stopped = {r.allocation for r in records if not r.completed}
    for r in records:
        start, last, job, tenant = ran.get(r.allocation, (r.start, r.last, r.job, r.tenant))
        ran[r.allocation] = (min(start, r.start), max(last, r.last), job, tenant)
    billed: dict[int, list[Metered]] = defaultdict(list)
    for m in usage:
        billed[m.allocation].append(m)
    per_team: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    lags, ends, unbilled, unstarted = [], [], [], []
    ran_again = {r.job for r in records}  # a job whose other allocation ran: this one released
    for allocation in sorted(set(ran) | set(billed)):
        if allocation in ran and ran[allocation][2] in unfinished:
            continue
        if allocation not in ran:
            m = billed[allocation][0]
            seconds = _seconds(billed[allocation])
            if seconds <= tolerance.start_s and m.job in ran_again:
                unstarted.append(seconds)  # stopped during the launcher's start-up
                continue
            return Verdict(
                False,
                f"allocation {allocation} (job {m.job}) billed {seconds:.1f} s, no "
                "workload ever ran",
            )
        start, last, job, tenant = ran[allocation]
        what = f"allocation {allocation} (job {job}, {tenant})"
        parts = sorted(billed.get(allocation, []), key=lambda m: m.start)
        if not parts:
            return Verdict(False, f"{what}: its workload ran {last - start:.1f} s, billed nothing")
        lag = start - parts[0].start
        if lag > tolerance.start_s:
            return Verdict(
                False, f"{what}: billed from {lag:.1f} s before its workload started (queued time)"
            )
        if lag < 0:
            return Verdict(False, f"{what}: its workload ran {-lag:.1f} s before it was billed")
        end = max(m.end for m in parts) - (last + TICK_S)
        early_end = tolerance.stop_s if allocation in stopped else tolerance.end_s
        if end > tolerance.end_s or end < -early_end:
            return Verdict(False, f"{what}: billed until {end:+.1f} s from its workload's end")
        if allocation in stopped:
            unbilled.append(max(0.0, -end))
            end = 0.0
        gap = next(
            (b.start - a.end for a, b in itertools.pairwise(parts) if b.start - a.end > 1e-3), None
        )
        if gap is not None:
            return Verdict(False, f"{what}: {gap:.1f} s of its run billed to nobody")
        lags.append(lag)
        ends.append(end)
        cards = max(m.devices for m in parts)
        per_team[tenant][0] += _seconds(parts) * cards
        per_team[tenant][1] += (last + TICK_S - start) * cards  # ran, as its record says
    teams = {
        t: {"billed_card_s": round(b, 1), "ran_card_s": round(r, 1)}
        for t, (b, r) in sorted(per_team.items())
    }
    return Verdict(
        True,
        f"{len(lags)} allocations: each billed from at most {tolerance.start_s:g} s before its "
        f"workload's first line (the launcher's start-up; p50 {_p50(lags)} s, max "
        f"{round(max(lags, default=0.0), 2)} s) to within {tolerance.end_s:g} s of its end "
        f"(worst {round(max((abs(e) for e in ends), default=0.0), 2)} s; {len(unbilled)} "
        f"stopped by the server billed to the release, at most {tolerance.stop_s:g} s before "
        f"their end), without gaps; {len(unstarted)} stopped before their first line, "
        f"billed {round(sum(unstarted), 2)} s",
        {
            "start_allowance_s": tolerance.start_s,
            "end_tolerance_s": tolerance.end_s,
            "billed_before_first_line_p50_s": _p50(lags),
            "billed_before_first_line_max_s": round(max(lags), 2) if lags else None,
            "stop_allowance_s": tolerance.stop_s,
            "ran_after_release_max_s": round(max(unbilled), 2) if unbilled else None,
            "billed_never_started": len(unstarted),
            "billed_never_started_s": round(sum(unstarted), 2),
            "teams": teams,
        },
    )


def _seconds(records: Sequence[Metered]) -> float:
    return sum(m.end - m.start for m in records)


def guarantee_served(
    submissions: Sequence[Submission],
    records: Sequence[Record],
    guarantees: dict[str, int],
    total_cards: int,
    bound_s: float,
    outages: Sequence[tuple[float, float]] = (),
) -> Verdict:
    """Invariant 3. A job is owed its cards when, at its acknowledgement, its team's running
    cards, its team's earlier jobs still waiting and its own cards fit the team's guarantee;
    an owed job must start within ``bound_s`` of the server being up (``outages``: when it
    was down, by the fault schedule; reported apart). A reclaim: an owed job acknowledged
    while every card of the cluster was in use."""
    first_start: dict[str, float] = {}
    spans: list[tuple[float, float, str, int]] = []
    cards_of = {s.key: s.cards for s in submissions}
    for r in records:
        first_start[r.key] = min(first_start.get(r.key, r.start), r.start)
        spans.append((r.start, r.last, r.tenant, cards_of.get(r.key, 0)))
    ordered = sorted(submissions, key=lambda s: s.acked_at)
    waits, reclaims = [], []
    for i, s in enumerate(ordered):
        at = s.acked_at
        running = [(team, c) for a, b, team, c in spans if a <= at < b]
        held = sum(c for team, c in running if team == s.team)
        waiting = sum(
            e.cards
            for e in ordered[:i]
            if e.team == s.team and first_start.get(e.key, float("inf")) > at
        )
        if held + waiting + s.cards > guarantees.get(s.team, 0):
            continue
        began = first_start.get(s.key, float("inf"))
        down = sum(max(0.0, min(b, began) - max(a, at)) for a, b in outages)
        wait = began - at - down
        if wait > bound_s:
            owed = guarantees[s.team]
            away = f" with the server up ({down:.1f} s more while it was down)" if down else ""
            return Verdict(
                False,
                f"{s.key} ({s.team}, {held} of its {owed} cards held) waited "
                f"{wait:.1f} s for its cards{away}, over {bound_s:g} s",
            )
        waits.append(max(0.0, wait))
        if sum(c for _, c in running) + s.cards > total_cards:
            reclaims.append(max(0.0, wait))
    return Verdict(
        True,
        f"{len(waits)} jobs owed their cards all started within {bound_s:g} s of the server "
        f"being up ({len(reclaims)} of them by reclaiming borrowed cards)",
        {
            "bound_s": bound_s,
            "owed": len(waits),
            "owed_wait_p99_s": _p99(waits),
            "reclaims": len(reclaims),
            "reclaim_p99_s": _p99(reclaims),
        },
    )


def _p50(values: list[float]) -> float | None:
    return round(sorted(values)[len(values) // 2], 2) if values else None


def _p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2)


def utilisation(
    records: Sequence[Record],
    cards_of: dict[str, int],
    total_cards: int,
    began: float,
    ended: float,
) -> float:
    """Card-seconds the workloads ran over the cards the cluster had from ``began`` to
    ``ended`` (a figure, not an invariant yet)."""
    busy = sum(
        (min(r.last, ended) - max(r.start, began)) * cards_of.get(r.key, 0)
        for r in records
        if r.last > began and r.start < ended
    )
    return round(busy / max(1e-9, total_cards * (ended - began)), 4)

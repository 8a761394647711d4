"""Fair share over time judged over a month (``gpupool simulate fairness``).

A pool of ``cards`` whole cards is owned by a tenant that runs nothing (``owner``: all of it is
idle, lent); teams with no guarantee of their own and unequal weights borrow all of it. Each
team keeps a backlog while it is active — whenever fewer than ``backlog`` of its jobs wait, it
submits more (seeded run times, ``run_h`` hours, one card each) — with unequal backlogs, and
some teams away a few days (their queue leaves with them: unequal demand over time). The
server's cycle (``run_cycle``) decides at every arrival and end, twice on the same demand:

- **static weights** (today's rule): idle cards go to the borrower with the lowest present
  dominant share per weight, with no memory (``history`` None);
- **fair share over time**: the cycle is given each team's decayed borrowed card-hours
  (``scheduler/fairshare.py``, half-life ``half_life_s``), accumulated as the replay runs
  (online: only the past).

Reported per team: its share of the month's borrowed card-hours against its weight's share
(the issue's goal: within 3 points of it), and Jain's index over share / weight-share (1.0:
every team exactly at its weight). The half-life is Slurm's default (7 days), not tuned; the
scenario (``TEAMS``) was written before either rule ran on it.
"""

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpupool.model import Job, JobKind, Node, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.fairshare import UsageHistory, decayed_card_hours
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree

DAY = 86400.0
OWNER = "owner"


@dataclass(frozen=True, slots=True)
class Team:
    name: str
    weight: float
    backlog: int  # jobs it keeps waiting while active
    away: tuple[tuple[float, float], ...] = ()  # days it asks nothing (its queue leaves)

    def active(self, t: float) -> bool:
        return not any(a * DAY <= t < b * DAY for a, b in self.away)


TEAMS = (
    Team("a", 1.0, 12),  # all month, a big backlog
    Team("b", 1.0, 3, ((8.0, 11.0),)),  # a small backlog, away three days
    Team("c", 2.0, 6, ((18.0, 20.0),)),  # the heaviest weight, away two days
)


@dataclass
class FairnessRun:
    rule: str
    borrowed_h: dict[str, float] = field(default_factory=dict)  # card-hours per team
    cycles: int = 0
    preempted: int = 0


def tree(teams: Sequence[Team], cards: int) -> TenantTree:
    return TenantTree(
        [Tenant("org"), Tenant(OWNER, "org", {"gpu": Quota.cards(cards)})]
        + [Tenant(t.name, "org", {"gpu": Quota.cards(0)}, t.weight) for t in teams]
    )


def replay(
    teams: Sequence[Team],
    cards: int,
    days: float,
    seed: int,
    half_life_s: float | None,
    run_h: tuple[float, float] = (1.0, 8.0),
) -> FairnessRun:
    """One month: ``half_life_s`` None is today's static rule."""
    nodes = [
        Node(f"n{k}", 64000, 512 * 1024, make_devices("A100-80G", 8, node=f"n{k}"))
        for k in range(math.ceil(cards / 8))
    ]
    rng = random.Random(seed)
    request = parse_request("gpu=1")
    state = ClusterState(nodes)
    out = FairnessRun("static weights" if half_life_s is None else "fair share over time")
    out.borrowed_h = {t.name: 0.0 for t in teams}
    usage = {t.name: 0.0 for t in teams}  # decayed borrowed card-hours, as of t
    running: dict[str, RunningJob] = {}
    ends: dict[str, float] = {}
    runs: dict[str, float] = {}
    queue: dict[str, Job] = {}
    serial = 0
    t, end = 0.0, days * DAY
    while t < end:
        done = sorted((j for j, e in ends.items() if e <= t), key=lambda j: (ends[j], j))
        for job_id in done:
            state.release(job_id)
            del running[job_id], ends[job_id]
        for team in teams:
            if not team.active(t):
                for job_id in [j for j, job in queue.items() if job.tenant == team.name]:
                    del queue[job_id]  # gone: it asks no more
                continue
            waiting = sum(1 for j in queue.values() if j.tenant == team.name)
            for _ in range(team.backlog - waiting):
                serial += 1
                job_id = f"{team.name}{serial}"
                queue[job_id] = Job(job_id, request, tenant=team.name, kind=JobKind.BATCH,
                                    priority_class="training", submit_time=t)  # fmt: skip
                runs[job_id] = rng.uniform(*run_h) * 3600.0
        history = None
        if half_life_s is not None:
            history = UsageHistory(half_life_s, borrowed=dict(usage))
        result = run_cycle(
            state, list(running.values()), list(queue.values()), tree(teams, cards), t, (),
            CycleConfig(), history=history,
        )  # fmt: skip
        out.cycles += 1
        out.preempted += len(result.preemptions)
        for p in result.preemptions:
            state.release(p.job_id)
            running.pop(p.job_id, None)
            ends.pop(p.job_id, None)
        for b in result.bindings:
            job = queue.pop(b.job_id)
            running[b.job_id] = RunningJob(job, b.placement, t, b.borrowed)
            ends[b.job_id] = t + runs[b.job_id]
        upcoming = [e for e in ends.values() if e > t]
        edges = [d * DAY for team in teams for w in team.away for d in w if d * DAY > t]
        t_next = min(upcoming + edges + [end])
        held: dict[str, float] = {}
        for r in running.values():
            if r.borrowed:
                held[r.job.tenant] = held.get(r.job.tenant, 0.0) + 1.0
        for name in usage:  # the interval [t, t_next] aged to t_next
            cards_held = held.get(name, 0.0)
            out.borrowed_h[name] += cards_held * (t_next - t) / 3600.0
            if half_life_s is not None:
                aged = usage[name] * math.pow(2.0, -(t_next - t) / half_life_s)
                add = decayed_card_hours(cards_held * (t_next - t), t, t_next, t_next,
                                         half_life_s)  # fmt: skip
                usage[name] = aged + add
        t = t_next
    return out


def judge(run: FairnessRun, teams: Sequence[Team]) -> dict[str, Any]:
    total = sum(run.borrowed_h.values()) or 1.0
    weights = sum(t.weight for t in teams)
    per: dict[str, Any] = {}
    ratios = []
    for team in teams:
        share = run.borrowed_h[team.name] / total
        target = team.weight / weights
        ratios.append(share / target)
        per[team.name] = {
            "card_hours": round(run.borrowed_h[team.name], 1),
            "share": round(share, 4),
            "weight_share": round(target, 4),
            "off_by": round(share - target, 4),
        }
    jain = sum(ratios) ** 2 / (len(ratios) * sum(x * x for x in ratios))
    return {
        "rule": run.rule,
        "teams": per,
        "jain": round(jain, 4),
        "max_off_by": round(max(abs(p["off_by"]) for p in per.values()), 4),
        "cycles": run.cycles,
        "preempted": run.preempted,
    }


def compare(
    teams: Sequence[Team] = TEAMS,
    cards: int = 32,
    days: float = 30.0,
    seed: int = 1,
    half_life_s: float = 7 * DAY,
) -> dict[str, Any]:
    """Today's static rule and fair share over time on the same demand."""
    return {
        "cards": cards,
        "days": days,
        "seed": seed,
        "half_life_s": half_life_s,
        "teams": [
            {"name": t.name, "weight": t.weight, "backlog": t.backlog, "away": t.away}
            for t in teams
        ],
        "static": judge(replay(teams, cards, days, seed, None), teams),
        "fairshare": judge(replay(teams, cards, days, seed, half_life_s), teams),
    }

"""What the season submits and when: jobs from the openb pod list (its creation and run times,
compressed) or, without the trace, a seeded synthetic mix of the same shape; teams from the
trace's own ``qos`` field.

Pure: no clock, no I/O beyond reading the trace file.
"""

import csv
import random
from dataclasses import dataclass
from pathlib import Path

from gpupool.model import SpecError

# qos → team: latency-sensitive pods are the serving team's, best-effort the research team's,
# Burstable and Guaranteed the training team's (the trace names no teams of its own)
TEAM_OF_QOS = {"LS": "serving", "BE": "research", "Burstable": "training", "Guaranteed": "training"}


@dataclass(frozen=True)
class Team:
    name: str
    weight: float
    guarantee_share: float  # of the cluster's cards


CLAIM_AFTER_S = 15.0  # the burst runs by then, even on a loaded machine
TEAMS = (Team("training", 2.0, 0.5), Team("serving", 1.0, 0.25), Team("research", 1.0, 0.25))


@dataclass(frozen=True)
class PlannedJob:
    key: str  # the submission's own name: idempotency key and the workload's record name
    team: str
    cards: int
    submit_at_s: float  # after the replay starts
    run_s: float  # how long the workload runs once started (each run)
    source: str  # the trace pod it stands for, or "synthetic", or "burst"


@dataclass(frozen=True)
class Plan:
    jobs: tuple[PlannedJob, ...]
    source: str  # "openb" or "synthetic"
    note: str  # what was taken from where, in words
    skipped: int  # trace pods left out (more cards than a node has)
    factor: float  # trace seconds per replay second


def guarantees(total_cards: int) -> dict[str, int]:
    return {t.name: int(total_cards * t.guarantee_share) for t in TEAMS}


def openb_plan(
    pods_csv: Path,
    jobs: int,
    replay_s: float,
    max_cards: int,
    run_bounds: tuple[float, float],
    first_pod: int = 0,
) -> Plan:
    """``jobs`` consecutive GPU pods from ``first_pod`` (in creation order); their creation
    times scaled so the window spans ``replay_s``; each runs its production run time
    (deletion - scheduled) scaled by the same factor, within ``run_bounds``. GPU-sharing pods
    take one whole card (the season's workloads are whole-card)."""
    try:
        with pods_csv.open(newline="") as handle:
            rows = [r for r in csv.DictReader(handle) if (r.get("num_gpu") or "0") != "0"]
    except OSError as exc:
        raise SpecError(f"season: cannot read the openb pod list {pods_csv}: {exc}") from None
    window: list[dict[str, str]] = []
    skipped = 0
    for row in rows[first_pod:]:
        if len(window) == jobs:
            break
        if int(row["num_gpu"]) > max_cards:
            skipped += 1
            continue
        window.append(row)
    if len(window) < jobs:
        raise SpecError(f"season: the openb pod list has {len(window)} usable GPU pods, not {jobs}")
    t0 = float(window[0]["creation_time"])
    span = max(1.0, float(window[-1]["creation_time"]) - t0)
    factor = span / replay_s
    low, high = run_bounds
    planned = []
    for row in window:
        began = row["scheduled_time"] or row["creation_time"]
        ran = float(row["deletion_time"]) - float(began)
        planned.append(
            PlannedJob(
                key=f"{row['name']}",
                team=TEAM_OF_QOS.get(row["qos"], "research"),
                cards=int(row["num_gpu"]),
                submit_at_s=round((float(row["creation_time"]) - t0) / factor, 3),
                run_s=round(min(high, max(low, ran / factor)), 2),
                source=row["name"],
            )
        )
    note = (
        f"openb pods {window[0]['name']}..{window[-1]['name']}: {span:.0f} trace seconds in "
        f"{replay_s:.0f} s (x{factor:.0f}); run times scaled alike and held within "
        f"{low:g}-{high:g} s; {skipped} pod(s) over {max_cards} cards left out"
    )
    return Plan(tuple(planned), "openb", note, skipped, factor)


def synthetic_plan(jobs: int, replay_s: float, run_bounds: tuple[float, float], seed: int) -> Plan:
    """Without the trace: arrivals spread evenly at random over ``replay_s``, teams in the
    openb default file's proportions of GPU pods (LS 66%, BE 32%, others 2% → serving,
    research, training), 1 card mostly (2 and 4 cards 5% each), run times uniform within
    ``run_bounds``."""
    rng = random.Random(seed)
    low, high = run_bounds
    times = sorted(rng.uniform(0, replay_s) for _ in range(jobs))
    planned = []
    for i, at in enumerate(times):
        team = rng.choices(("serving", "research", "training"), (66, 32, 2))[0]
        cards = rng.choices((1, 2, 4), (90, 5, 5))[0]
        planned.append(
            PlannedJob(
                f"syn-{i:05d}",
                team,
                cards,
                round(at, 3),
                round(rng.uniform(low, high), 2),
                "synthetic",
            )
        )
    note = f"synthetic mix, seed {seed}: the openb trace was not found"
    return Plan(tuple(planned), "synthetic", note, 0, 1.0)


def with_reclaim_probe(plan: Plan, total_cards: int, at_s: float, run_s: float) -> Plan:
    """Add a borrowing burst and the claim that must reclaim it: at ``at_s`` the research
    team asks for every card of the cluster (one-card jobs, most of them borrowed), and
    ``CLAIM_AFTER_S`` later the training team asks for its whole guarantee."""
    burst = [
        PlannedJob(f"burst-{i:04d}", "research", 1, at_s, run_s, "burst")
        for i in range(total_cards)
    ]
    claim = [
        PlannedJob(f"claim-{i:04d}", "training", 1, at_s + CLAIM_AFTER_S, run_s / 2, "claim")
        for i in range(guarantees(total_cards)["training"])
    ]
    jobs = tuple(sorted((*plan.jobs, *burst, *claim), key=lambda j: j.submit_at_s))
    return Plan(jobs, plan.source, plan.note, plan.skipped, plan.factor)

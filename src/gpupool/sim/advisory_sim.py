"""What advisory mode costs and what approving its proposals gains, on a team scenario: the
pooled replay (``team_replay``) with every decision of the advisory actions held back as a
proposal until a person approves it ``delay`` after it was made — instantly (automatic
action), after minutes or hours (someone reads the queue now and then), or never (every
proposal rejected: the pool runs only what needs no approval).

Same semantics as the server: one proposal per job and action; an approval lets the job's
next decision of that action go ahead; a job already proposed is not proposed again.
Reported per delay: the proposals made and approved per action, utilisation, queue delays,
and card-hours served — the gain of approving them all is the card-hours over "never"."""

from collections import Counter
from collections.abc import Sequence
from typing import Any

from gpupool.scheduler.advice import decisions, withhold
from gpupool.scheduler.session import CycleResult
from gpupool.sim.scenario import Scenario
from gpupool.sim.team_replay import HOUR, generate_jobs, replay_mode

NEVER = float("inf")


class DelayedApprover:
    """Holds decisions of ``actions`` until ``delay_s`` after their proposal (inf: never)."""

    def __init__(self, actions: set[str], delay_s: float):
        self.actions, self.delay_s = actions, delay_s
        self.proposed_at: dict[tuple[str, str], float] = {}
        self.made: Counter[str] = Counter()
        self.approved: Counter[str] = Counter()

    def __call__(self, result: CycleResult, now: float) -> None:
        held: dict[str, str] = {}
        for b, kind in decisions(result):
            if kind not in self.actions or b.job_id in held:
                continue
            key = (b.job_id, kind)
            if key not in self.proposed_at:
                self.proposed_at[key] = now
                self.made[kind] += 1
            if now >= self.proposed_at[key] + self.delay_s:
                del self.proposed_at[key]
                self.approved[kind] += 1
                continue
            held[b.job_id] = f"waiting for approval ({kind})"
        withhold(result, held)


def compare(
    scenario: Scenario, delays_s: Sequence[float], actions: Sequence[str] = ("bind",)
) -> dict[str, Any]:
    """The pooled replay with each approval delay (0: automatic; inf: never approved)."""
    jobs = generate_jobs(scenario)
    cards = sum(g.count * g.cards for g in scenario.cluster)
    horizon = scenario.days * 24 * HOUR
    runs = []
    for delay in delays_s:
        approver = DelayedApprover(set(actions), delay)
        result = replay_mode(scenario, jobs, "pooled", advisor=approver)
        summary = result.summary(cards, horizon)
        runs.append(
            {
                "delay_s": None if delay == NEVER else delay,
                "proposals": dict(approver.made),
                "approved": dict(approver.approved),
                "card_hours": round(result.card_seconds / HOUR, 1),
                "gpu_utilization": summary["gpu_utilization"],
                "queue_delay_p95_s": summary["queue_delay_p95_s"],
                "started": sum(len(v) for v in result.started.values()),
            }
        )
    never = next((r for r in runs if r["delay_s"] is None), None)
    for r in runs:
        if never is not None:
            r["gain_card_hours"] = round(r["card_hours"] - never["card_hours"], 1)
    return {
        "scenario": scenario.name,
        "cards": cards,
        "jobs": len(jobs),
        "actions": list(actions),
        "runs": runs,
    }

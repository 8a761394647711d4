"""Capacity planning: the smallest pool that meets a queue-delay target, pooled vs a true
static partition (each team on servers of its own).

The scenario's first server group is resized (its model and cards per server stay); team
guarantees scale with the pool so that each keeps its share. For each mode, a binary search
over the number of servers finds the fewest whose replay meets the target for every team —
the "10 cards -> 7" question answered with a number for the user's own workload.
"""

from typing import Any

from gpupool.model import SpecError
from gpupool.sim.scenario import Scenario
from gpupool.sim.team_replay import HOUR, generate_jobs, replay_mode

PLAN_MODES = ("static_partition", "pooled")


def _resized(scenario: Scenario, servers: int) -> Scenario:
    group = scenario.cluster[0]
    before = sum(g.count * g.cards for g in scenario.cluster)
    cluster = [group.model_copy(update={"count": servers}), *scenario.cluster[1:]]
    after = sum(g.count * g.cards for g in cluster)
    teams = [
        t.model_copy(update={"guarantee": t.guarantee * after / before}) for t in scenario.teams
    ]
    return scenario.model_copy(update={"cluster": cluster, "teams": teams})


def meets(scenario: Scenario, jobs, mode: str, target_p95_s: float) -> tuple[bool, dict]:
    result = replay_mode(scenario, jobs, mode)
    cards = sum(g.count * g.cards for g in scenario.cluster)
    summary = result.summary(cards, scenario.days * 24 * HOUR)
    ok = True
    for team in summary["tenants"].values():
        p95 = team["queue_delay_p95_s"]  # unstarted jobs count the time they waited
        ok &= p95 is None or p95 <= target_p95_s
    return ok, summary


def plan(scenario: Scenario, target_p95_s: float, max_servers: int | None = None) -> dict:
    if target_p95_s < 0:
        raise SpecError("plan: the target must not be negative", field="target")
    jobs = generate_jobs(scenario)
    top = max_servers or scenario.cluster[0].count * 2
    out: dict[str, Any] = {"scenario": scenario.name, "target_p95_s": target_p95_s}
    for mode in PLAN_MODES:
        low, high, best = 1, top, None
        while low <= high:
            mid = (low + high) // 2
            ok, summary = meets(_resized(scenario, mid), jobs, mode, target_p95_s)
            if ok:
                best, high = (mid, summary), mid - 1
            else:
                low = mid + 1
        if best is None:
            out[mode] = {"servers": None, "cards": None, "note": f"not met with {top} servers"}
        else:
            servers, summary = best
            cards = servers * scenario.cluster[0].cards + sum(
                g.count * g.cards for g in scenario.cluster[1:]
            )
            out[mode] = {
                "servers": servers,
                "cards": cards,
                "gpu_utilization": summary["gpu_utilization"],
            }
    return out

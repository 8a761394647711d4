"""Advisory mode simulated on a team scenario: instant approval is automatic action, never
approving runs nothing that needs approval, a delay costs in between; the CLI."""

import json

import yaml

from gpupool.scheduler.reasons import Wait
from gpupool.scheduler.session import Binding, CycleResult, Preemption
from gpupool.scheduler.types import Placement
from gpupool.sim.advisory_sim import NEVER, DelayedApprover, compare
from gpupool.sim.scenario import Scenario
from gpupool.sim.team_replay import generate_jobs, replay_mode
from tests.support.builders import TINY_SCENARIO
from tests.support.cli import gpupool


def _tiny() -> Scenario:
    return Scenario.model_validate(TINY_SCENARIO)


def test_instant_approval_is_automatic_action_and_never_runs_nothing():
    scenario = _tiny()
    result = compare(scenario, [0, 3600, NEVER], ["bind"])
    instant, hour, never = result["runs"]
    automatic = replay_mode(scenario, generate_jobs(scenario), "pooled")
    assert instant["card_hours"] == round(automatic.card_seconds / 3600, 1)
    assert instant["proposals"]["bind"] == instant["approved"]["bind"] == instant["started"]
    assert never["card_hours"] == 0.0 and never["started"] == 0 and not never["approved"]
    assert 0 < hour["card_hours"] < instant["card_hours"]
    assert instant["gain_card_hours"] == instant["card_hours"] > hour["gain_card_hours"] > 0
    assert hour["queue_delay_p95_s"] > instant["queue_delay_p95_s"]


def test_a_held_decision_takes_its_victims_moves_along():
    def binding(job: str, action: str, after: tuple[str, ...] = ()) -> Binding:
        return Binding(job, Placement(job, (), "t"), False, action, after)

    result = CycleResult(
        bindings=[binding("head", "defragment", ("moved",)), binding("moved", "allocate"),
                  binding("other", "allocate")],
        preemptions=[Preemption("moved", "head", "moved by defragmentation", 0, "suspend")],
    )  # fmt: skip
    approver = DelayedApprover({"defragment"}, 600)
    approver(result, 0.0)
    assert [b.job_id for b in result.bindings] == ["other"] and result.preemptions == []
    assert {k: str(v) for k, v in result.pending.items()} == {
        "head": "waiting for approval (defragment)"
    }
    assert result.pending["head"].code is Wait.APPROVAL
    assert approver.made == {"defragment": 1}


def test_cli(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_SCENARIO))
    out = gpupool("simulate", "advisory", str(path), "--delay", "0,never", "--json")
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)["runs"]
    assert [r["delay_s"] for r in runs] == [0.0, None]
    bad = gpupool("simulate", "advisory", str(path), "--delay", "soon")
    assert bad.returncode == 2 and "'soon' is not N[s|m|h|d] or never" in bad.stderr
    bad = gpupool("simulate", "advisory", str(path), "--actions", "scale-out")
    assert bad.returncode == 2 and "scale-out" in bad.stderr

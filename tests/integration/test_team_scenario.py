"""Team scenarios: the YAML format, and static partition versus pooling on the same jobs."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.model import SpecError
from gpupool.sim.scenario import load_scenario, parse_scenario
from gpupool.sim.team_replay import MODES, compare, generate_jobs
from tests.support.builders import TINY_SCENARIO
from tests.support.cli import gpupool
from tests.support.paths import EXAMPLES

EXAMPLE = EXAMPLES / "seed-scenario.yaml"


def test_the_example_scenario_loads():
    scenario = load_scenario(EXAMPLE)
    assert sum(g.count * g.cards for g in scenario.cluster) == 40
    assert [t.guarantee for t in scenario.teams] == [20, 10, 10]


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"teams": []}, "teams"),
        ({"days": -1}, "days"),
        (
            {"workloads": [{"team": "nobody", "request": "gpu=1", "arrivals_per_hour": 1}]},
            "unknown team 'nobody'",
        ),
        (
            {"workloads": [{"team": "busy", "request": "gpu=two", "arrivals_per_hour": 1}]},
            "'two' is neither a count nor a model name",
        ),
        (
            {"workloads": [{"team": "busy", "request": "gpu=1"}]},
            "give arrivals_per_hour or service",
        ),
        ({"cluster": [{"count": 0, "model": "A100-80G", "cards": 4}]}, "cluster.0.count"),
        ({"victim_order": "oldest"}, "victim_order"),
    ],
)
def test_bad_scenarios_name_the_field(patch, needle):
    with pytest.raises(SpecError, match=needle):
        parse_scenario({**TINY_SCENARIO, **patch})


def test_bad_yaml_is_a_clear_error(tmp_path):
    broken = tmp_path / "s.yaml"
    broken.write_text("teams: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_scenario(broken)
    with pytest.raises(SpecError, match="does not exist"):
        load_scenario(tmp_path / "missing.yaml")


def test_jobs_are_seeded_and_the_same_for_both_modes():
    scenario = parse_scenario(TINY_SCENARIO)
    assert generate_jobs(scenario) == generate_jobs(scenario)


def test_pooling_lends_idle_guarantee_without_hurting_its_owner():
    result = compare(parse_scenario(TINY_SCENARIO))
    static, pooled = result["static_partition"], result["pooled"]
    assert pooled["gpu_utilization"] > static["gpu_utilization"]
    # static: the busy team never holds more than its 4 cards, so at most half the pool
    assert static["gpu_utilization"] <= 0.5 + 1e-9
    busy_s, busy_p = static["tenants"]["busy"], pooled["tenants"]["busy"]
    assert busy_p["started"] >= busy_s["started"]
    idle_s, idle_p = static["tenants"]["idle"], pooled["tenants"]["idle"]
    assert idle_p["started"] == idle_s["started"]  # reclaim gives the owner its cards back
    tick = TINY_SCENARIO["tick_minutes"] * 60
    assert idle_p["queue_delay_p95_s"] <= idle_s["queue_delay_p95_s"] + tick


def test_a_static_partition_gives_each_team_servers_of_its_own():
    from gpupool.sim.team_replay import partition

    scenario = parse_scenario(
        {
            **TINY_SCENARIO,
            "cluster": [{"count": 3, "model": "A100-80G", "cards": 4, "cpu": 64}],
            "teams": [
                {"name": "a", "guarantee": 6},
                {"name": "b", "guarantee": 4},
                {"name": "c", "guarantee": 1},
            ],
            "workloads": [{"team": "a", "request": "gpu=1", "arrivals_per_hour": 1}],
        }
    )
    nodes, owners = partition(scenario)
    cards = {n.name: len(n.devices) for n in nodes}
    assert owners == {"a": ["g0-000", "g0-001-0"], "b": ["g0-001-1", "g0-002-0"], "c": ["g0-002-1"]}
    assert [cards[n] for n in owners["a"]] == [4, 2] and [cards[n] for n in owners["b"]] == [2, 2]
    half = next(n for n in nodes if n.name == "g0-001-0")
    assert half.cpu_millis == 32_000  # the split server's CPU goes with its cards
    # one unowned card of g0-002 is in nobody's partition


def test_a_partition_keeps_other_teams_off_and_a_big_job_off_split_servers():
    """Team a's 4-card job cannot use b's idle server, nor its own two halves of servers."""
    scenario = parse_scenario(
        {
            **TINY_SCENARIO,
            "cluster": [{"count": 2, "model": "A100-80G", "cards": 4}],
            "teams": [{"name": "a", "guarantee": 2}, {"name": "b", "guarantee": 6}],
            "workloads": [
                {"team": "a", "kind": "training", "request": "gpu=4", "arrivals_per_hour": 1},
            ],
        }
    )
    result = compare(scenario)
    a = {m: result[m]["tenants"]["a"] for m in MODES}
    assert a["static_partition"]["started"] == 0  # 2 cards of its own: a 4-card job never fits
    assert a["static_quota"]["started"] == 0  # capped at its guarantee of 2
    assert a["pooled"]["started"] > 0  # borrows b's idle cards


def test_cli_json(tmp_path):
    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_SCENARIO))
    out = gpupool("simulate", "scenario", str(path), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    for mode in ("static_partition", "static_quota", "pooled"):
        assert {"gpu_utilization", "queue_delay_p95_s", "tenants"} <= set(data[mode])
    assert data["victim_order"] == "work"  # the server's default
    aged = gpupool("simulate", "scenario", str(path), "--victim-order", "age", "--json")
    assert json.loads(aged.stdout)["victim_order"] == "age"
    bad = gpupool("simulate", "scenario", str(path), "--victim-order", "oldest")
    assert bad.returncode != 0 and "victim-order: 'oldest' is not one of work, age" in bad.stderr


def test_plan_finds_a_smaller_pool_with_pooling():
    from gpupool.sim.plan import plan

    scenario = parse_scenario(
        {
            **TINY_SCENARIO,
            "cluster": [{"count": 4, "model": "A100-80G", "cards": 2}],
            "workloads": [
                {
                    "team": "busy",
                    "kind": "training",
                    "request": "gpu=1",
                    "arrivals_per_hour": 2,
                    "hours": [0, 12],
                    "duration_hours": 1,
                },
                {
                    "team": "idle",
                    "kind": "dev",
                    "request": "gpu=1",
                    "arrivals_per_hour": 2,
                    "hours": [12, 24],
                    "duration_hours": 1,
                },
            ],
        }
    )
    result = plan(scenario, target_p95_s=3600, max_servers=8)
    static = result["static_partition"]
    assert result["pooled"]["servers"] is not None and static["servers"] is not None
    assert result["pooled"]["cards"] <= static["cards"]
    with pytest.raises(SpecError, match="must not be negative"):
        plan(scenario, target_p95_s=-1)


def test_scenario_report_and_csv(tmp_path):
    import re

    import yaml

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY_SCENARIO))
    report, series = tmp_path / "r.html", tmp_path / "s.csv"
    out = gpupool("simulate", "scenario", str(path), "--report", str(report), "--csv", str(series))
    assert out.returncode == 0, out.stderr
    html = report.read_text()
    assert html.count("<polyline") == 3 and "<script" not in html
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html)
    rows = series.read_text().splitlines()
    ticks = 24 * 60 // TINY_SCENARIO["tick_minutes"]
    assert rows[0] == "mode,hour,cards_in_use" and len(rows) == 1 + 3 * ticks


@given(
    seed=st.integers(0, 10_000),
    busy_rate=st.floats(0.5, 8),
    share=st.sampled_from(["gpu=1", "gpu=2", "gpu_share=0.5", "gpu=4"]),
    guarantee=st.integers(0, 8),
)
def test_replays_never_exceed_the_pool_and_account_for_every_job(seed, busy_rate, share, guarantee):
    scenario = parse_scenario(
        {
            **TINY_SCENARIO,
            "days": 0.5,
            "seed": seed,
            "teams": [
                {"name": "busy", "guarantee": guarantee},
                {"name": "idle", "guarantee": 8 - guarantee},
            ],
            "workloads": [
                {
                    "team": "busy",
                    "kind": "training",
                    "request": share,
                    "arrivals_per_hour": busy_rate,
                    "duration_hours": 2,
                },
                {
                    "team": "idle",
                    "kind": "dev",
                    "request": "gpu=1",
                    "arrivals_per_hour": 1,
                    "duration_hours": 1,
                },
            ],
        }
    )
    result = compare(scenario)
    for mode in MODES:
        assert all(used <= 8 + 1e-9 for _, used in result[mode]["cards_in_use"])
        assert 0 <= result[mode]["gpu_utilization"] <= 1
    jobs = generate_jobs(scenario)  # every generated job is accounted for in every mode
    for mode in MODES:
        counted = sum(t["jobs"] for t in result[mode]["tenants"].values())
        assert counted == len(jobs)

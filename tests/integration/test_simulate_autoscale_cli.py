"""``gpupool simulate autoscale`` as a user runs it: on the shipped ServeGen excerpt, with a
scenario file, and with a missing trace or a bad scenario named plainly; on the full two
weeks of both shared models when GPUPOOL_SERVEGEN_DIR points at ServeGen's data/language."""

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import gpupool
from tests.support.paths import DATA

EXCERPT = DATA / "servegen" / "m-large"
QUICK = """\
tick_s: 60
reactive: {scale_down_delays_s: [0], utilisation_step: 0.1}
predictive: {headroom_step: 0.1}
"""


def test_the_cli_compares_on_the_excerpt(tmp_path):
    scenario = tmp_path / "quick.yaml"
    scenario.write_text(QUICK)
    run = gpupool(
        "simulate", "autoscale", "--trace", str(EXCERPT), "--scenario", str(scenario), "--json"
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["trace"]["clients"] == 2
    for policy in ("reactive", "predictive"):
        assert set(result[policy]) >= {
            "underprovisioned_min",
            "unserved_requests",
            "wait_p95_s",
            "replica_hours",
            "training_gpu_hours",
            "headroom",
        }
    assert result["reactive"]["replica_hours"] >= result["predictive"]["replica_hours"]
    _harvest_holds_together(result["harvest"])
    table = gpupool(
        "simulate",
        "autoscale",
        "--trace",
        str(EXCERPT),
        "--scenario",
        str(scenario),
        env={"COLUMNS": "80"},
    )
    assert table.returncode == 0, table.stderr
    assert "reactive" in table.stdout and "predictive" in table.stdout
    assert "Harvest@99" in table.stdout and "gpupool-warm" in table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    # --harvest-only: the same Harvest@99 block, the curves left out
    only = gpupool("simulate", "autoscale", "--trace", str(EXCERPT), "--scenario",
                   str(scenario), "--harvest-only", "--json")  # fmt: skip
    assert only.returncode == 0, only.stderr
    alone = json.loads(only.stdout)
    assert alone["harvest"] == result["harvest"] and "curves" not in alone


def _harvest_holds_together(h: dict) -> None:
    """Harvest@99's report: every contender, the ceiling above them all, the warm path's
    fast vacate losing less work per stop than the anchors' preemptions."""
    c = h["contenders"]
    assert set(c) == {
        "kpa-480s",
        "kpa-90s",
        "constant-90s",
        "seasonal-90s",
        "gpupool-warm",
        "gpupool-warm-fixed",
        "clairvoyant",
    }
    ceiling = c["clairvoyant"]["harvest_at_99"]
    assert ceiling is not None
    assert all(r["harvest_at_99"] is None or r["harvest_at_99"] <= ceiling for r in c.values())
    assert c["kpa-480s"]["cold_lead_s"] == 480 and c["kpa-90s"]["cold_lead_s"] == 90
    warm, kpa = c["gpupool-warm"], c["kpa-90s"]
    assert warm["replicas"] == "pack" and kpa["replicas"] == "spread"
    for fixed in (warm["learned"]["judged"], kpa["learned"]["judged"]):
        assert fixed["harvest_gang_gpu_hours_week"] <= fixed["harvest_gpu_hours_week"]
    per_stop = [r["learned"]["judged"] for r in (warm, kpa)]
    assert per_stop[0]["lost_gpu_hours_week"] / max(per_stop[0]["scale_ups"], 1) < (
        per_stop[1]["lost_gpu_hours_week"] / max(per_stop[1]["scale_ups"], 1)
    )
    assert warm["learned"]["judged"]["parked_engines"] > 0
    # the headline: each contender's learned setting judged out of sample, its front beside
    assert set(h["headline"]) == set(c)
    limit = h["slo_limit_min"]
    assert limit == pytest.approx(0.01 * 7 * 1440, abs=0.1)
    for name, head in h["headline"].items():
        judged = c[name]["learned"]["judged"]
        assert head["slo_violating_min"] == judged["slo_violating_min"]
        assert head["harvest_gpu_hours_week"] == judged["harvest_gpu_hours_week"]
        assert head["met_slo"] == (judged["slo_violating_min"] <= limit)
        assert head["front_harvest_at_99"] == c[name]["harvest_at_99"]
    best = h["best_anchor"]
    assert h["learned_goal_met"] == (
        best is not None
        and h["headline"]["gpupool-warm"]["met_slo"]
        and h["headline"]["gpupool-warm"]["harvest_gpu_hours_week"] >= c[best]["harvest_at_99"]
    )


def test_a_missing_trace_or_a_bad_scenario_is_one_clear_line(tmp_path):
    env = {"GPUPOOL_SERVEGEN_DIR": ""}
    run = gpupool("simulate", "autoscale", env=env)
    assert run.returncode == 2 and "GPUPOOL_SERVEGEN_DIR" in run.stderr
    assert "Traceback" not in run.stderr
    run = gpupool("simulate", "autoscale", "--trace", str(tmp_path))
    assert run.returncode == 2 and "no ServeGen *-trace.csv files" in run.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("service: {load_s: -3}\n")
    run = gpupool("simulate", "autoscale", "--trace", str(EXCERPT), "--scenario", str(bad))
    assert run.returncode == 2 and "service.load_s" in run.stderr
    assert "Traceback" not in run.stderr


def _models() -> Path:
    folder = os.environ.get("GPUPOOL_SERVEGEN_DIR", "")
    if not folder or not (Path(folder) / "m-large").is_dir():
        pytest.skip("set GPUPOOL_SERVEGEN_DIR to ServeGen's data/language (m-large, m-small)")
    return Path(folder)


@pytest.mark.parametrize("model", ["m-large", "m-small"])
def test_the_full_two_weeks_compare_at_equal_cost(model, tmp_path):
    scenario = tmp_path / "coarse.yaml"
    scenario.write_text("tick_s: 60\nreactive: {utilisation_step: 0.05}\n")
    run = gpupool(
        "simulate",
        "autoscale",
        "--trace",
        str(_models() / model),
        "--scenario",
        str(scenario),
        "--json",
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["judged_days"] == 7 and result["skipped_rows"] == 0
    assert result["reactive"]["replica_hours"] >= result["predictive"]["replica_hours"]
    # the learned quantile of the rise covers the judged days' real rises about as often
    assert abs(result["forecast_coverage"]["seasonal-quantile"] - result["quantile"]) < 0.1
    # the seasonal quantile forecast covers more than today's level does
    assert (
        result["forecast_coverage"]["seasonal-quantile"] > result["forecast_coverage"]["constant"]
    )
    h = result["harvest"]
    _harvest_holds_together(h)
    # issue 49's warm path (its headroom fixed) beats the best anchor on its front on both
    # counts (its goals, a third of the gap and half the minutes, are measured at 10-s ticks
    # in docs/simulation.md; at these 60-s ticks the 20-s warm lead rounds up to a whole
    # minute and the gain shrinks)
    said = {k: h[k] for k in h if k != "contenders"}
    c = h["contenders"]
    fixed = c["gpupool-warm-fixed"]
    assert fixed["harvest_at_99"] > c[h["best_anchor"]]["harvest_at_99"], said
    assert fixed["slo_violating_min_at_budget"] < h["best_anchor_slo_at_budget"], said
    # issue 66: with the SLO feedback the setting chosen on days 2-7 holds the target on
    # days 8-14, where every anchor's and the fixed warm path's miss it
    head = h["headline"]
    assert head["gpupool-warm"]["met_slo"], said
    for name in ("kpa-480s", "kpa-90s", "constant-90s", "seasonal-90s", "gpupool-warm-fixed"):
        assert not head[name]["met_slo"], (name, said)

"""The generic job trace (CSV / JSONL) and replaying it as a team scenario."""

import json

import pytest

from gpupool.model import SliceKind, SpecError
from gpupool.sim.scenario import load_scenario
from gpupool.sim.team_replay import compare
from gpupool.sim.traces.jobs import load_job_trace


def test_csv_with_sacct_style_durations_and_timestamps(tmp_path):
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "submit_time,duration,tenant,request,kind\n"
        "2026-11-02T09:00:00,01:30:00,algo,gpu=A100-80G:2,training\n"
        "2026-11-02T08:00:00,1-00:00:00,dev,gpu_share=0.5,dev\n"
        "2026-11-02T10:00:00,-5,algo,gpu=1,training\n"
        "2026-11-02T11:00:00,600,algo,gpu=two,training\n"
    )
    jobs, errors = load_job_trace(trace)
    assert [(j.tenant, j.submit_s, j.duration_s) for j in jobs] == [
        ("dev", 0.0, 86400.0),
        ("algo", 3600.0, 5400.0),
    ]
    assert jobs[0].request.kind is SliceKind.SHARE
    assert [e.line for e in errors] == [4, 5]
    assert "duration" in errors[0].message and "neither a count" in errors[1].message
    with pytest.raises(SpecError, match="2 bad row"):
        load_job_trace(trace, strict=True)


def test_jsonl_reports_garbage_lines(tmp_path):
    trace = tmp_path / "jobs.jsonl"
    lines = [
        {"submit_time": 0, "duration": 60, "tenant": "a", "request": "gpu=1"},
        "not json at all",
        {"submit_time": 5, "duration": 60, "tenant": "a"},
    ]
    trace.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
    jobs, errors = load_job_trace(trace)
    assert len(jobs) == 1
    assert [(e.line, e.message.split(":")[0]) for e in errors] == [
        (2, "not JSON"),
        (3, "request is missing"),
    ]


def test_missing_columns_and_files(tmp_path):
    bad = tmp_path / "jobs.csv"
    bad.write_text("submit_time,tenant\n0,a\n")
    with pytest.raises(SpecError, match=r"missing column.*duration, request"):
        load_job_trace(bad)
    with pytest.raises(SpecError, match="is not a file"):
        load_job_trace(tmp_path / "nope.csv")


def test_a_scenario_can_replay_a_trace(tmp_path):
    trace = tmp_path / "history.csv"
    rows = [f"{i * 300},14400,busy,gpu=1,training" for i in range(40)]  # 160 card-hours
    trace.write_text("submit_time,duration,tenant,request,kind\n" + "\n".join(rows) + "\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: from-history\ndays: 1\ntick_minutes: 10\n"
        "cluster: [{count: 1, model: A100-80G, cards: 8}]\n"
        "teams: [{name: busy, guarantee: 4}, {name: other, guarantee: 4}]\n"
        "traces: [history.csv]\n"
    )
    result = compare(load_scenario(scenario))
    assert result["jobs"] == 40
    # static: 4 cards for 160 card-hours of work; pooled borrows the idle team's 4
    static = result["static_partition"]
    assert static["gpu_utilization"] <= 0.5 + 1e-9
    assert result["pooled"]["gpu_utilization"] > static["gpu_utilization"]
    unknown = tmp_path / "u.yaml"
    unknown.write_text(scenario.read_text().replace("{name: busy, guarantee: 4}, ", ""))
    with pytest.raises(SpecError, match="unknown team 'busy'"):
        compare(load_scenario(unknown))

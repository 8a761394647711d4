"""The CLI as a user runs it: a real process, clear errors with exit code 2."""

import json

from tests.support.cli import gpupool


def test_bad_spec_prints_one_clear_line_and_exits_2():
    out = gpupool("request", "gpu=two,cpu=4")
    assert out.returncode == 2
    assert "error: gpu: 'two' is neither a count nor a model name" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_good_spec_is_explained():
    out = gpupool("request", "gpu_mem=20GiB,cpu=4")
    assert out.returncode == 0
    assert "share" in out.stdout and "20GiB" in out.stdout


def test_mig_plan_and_impossible_plan():
    ok = gpupool("mig", "plan", "A100-80G", "3g.40gb=1", "1g.10gb=4")
    assert ok.returncode == 0
    assert ok.stdout.split() == ["1g.10gb@0", "1g.10gb@1", "1g.10gb@2", "1g.10gb@3", "3g.40gb@4"]
    bad = gpupool("mig", "plan", "A100-80G", "3g.40gb=2", "1g.10gb=1")
    assert bad.returncode == 2 and "no legal layout" in bad.stderr
    garbled = gpupool("mig", "plan", "A100-80G", "lots")
    assert garbled.returncode == 2 and "is not PROFILE=COUNT" in garbled.stderr


def test_bench_placement_prints_the_documented_json():
    out = gpupool(
        "bench", "placement", "--nodes", "20", "--jobs", "200", "--policy", "fgd", "--json"
    )
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert set(figures) == {
        "policy",
        "requests",
        "distinct_requests",
        "nodes",
        "gpus",
        "jobs",
        "placed",
        "placements_per_s",
        "p50_ms",
        "p99_ms",
        "peak_rss_mb",
    }
    assert figures["gpus"] == 160 and figures["jobs"] == 200
    assert 0 < figures["placed"] <= 200
    assert figures["requests"] == "synthetic" and figures["distinct_requests"] <= 14


def test_bench_request_mixes():
    distinct = gpupool(
        "bench", "placement", "--nodes", "20", "--jobs", "300", "--requests", "distinct", "--json"
    )
    assert distinct.returncode == 0, distinct.stderr
    assert json.loads(distinct.stdout)["distinct_requests"] == 300  # no two alike
    cycle = gpupool(
        "bench", "cycle", "--nodes", "20", "--pending", "200", "--tenants", "4",
        "--requests", "distinct", "--json",
    )  # fmt: skip
    assert cycle.returncode == 0, cycle.stderr
    figures = json.loads(cycle.stdout)
    assert figures["requests"] == "distinct" and figures["snapshot_ms"] <= figures["cycle_ms"]
    bad = gpupool("bench", "placement", "--nodes", "2", "--jobs", "1", "--requests", "real")
    assert bad.returncode == 2 and "requests: 'real' is not one of" in bad.stderr


def test_bench_rejects_unknown_policy():
    out = gpupool("bench", "placement", "--nodes", "2", "--jobs", "1", "--policy", "fastest")
    assert out.returncode == 2 and "policy: 'fastest' is not one of" in out.stderr


def test_help_shows_defaults_written_in_brackets():
    """Rich reads "[default: ...]" as markup and drops it unless escaped."""
    out = gpupool("server", "--help", env={"COLUMNS": "200"})
    assert out.returncode == 0
    assert "[default: data]" in out.stdout and "[default: 8080]" in out.stdout


def test_shell_completion_completes_commands():
    """What gpupool --install-completion wires into the shell answers with our commands."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(sys.executable).parent / "gpupool"
    env = {**os.environ, "_GPUPOOL_COMPLETE": "complete_bash", "COMP_WORDS": "gpupool job re",
           "COMP_CWORD": "2"}  # fmt: skip
    out = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["release", "requeue"]

"""``gpupool bench figures --check`` (issue 58) as CI runs it: it passes on the real figures,
fails naming the figure, its baseline and the new value when a baseline is made stricter
(the seam: ``--baselines``, no production code touched), and rewrites baselines only when
asked, saying why."""

import json

from gpupool.bench.figures import baselines as files
from tests.support.cli import gpupool


def _gate(*args: str):
    return gpupool("bench", "figures", "--json", "--workers", "1", *args)


def test_the_gate_passes_on_the_real_figures():
    ran = _gate("--check", "--only", "scenario,roi")
    report = json.loads(ran.stdout)
    assert ran.returncode == 0, report["summary"]
    assert report["passed"] and not report["failures"] and not report["not_computed"]
    by_name = {f["name"]: f for f in report["figures"]}
    assert by_name["roi.q3.cards_freed"]["value"] == 28
    partition = by_name["scenario.seed.static_partition.gpu_utilization"]
    assert partition["value"] == partition["baseline"] == 0.6211
    assert report["timing"]["machine"]["cpus"] >= 1  # reported, not gated


def test_the_gate_fails_on_a_figure_worse_than_a_stricter_baseline(tmp_path):
    stricter = files.load()
    stricter["roi.q3.cards_freed"] = files.Baseline(29.0, 0.0, "equal", "test", "stricter")
    path = tmp_path / "baselines.json"
    files.save(stricter, path)
    ran = _gate("--check", "--only", "roi", "--baselines", str(path))
    report = json.loads(ran.stdout)
    assert ran.returncode == 1
    assert report["failures"] == ["roi.q3.cards_freed"]
    assert "roi.q3.cards_freed = 28, baseline 29" in report["summary"][0]
    assert gpupool("bench", "figures", "--only", "roi", "--baselines", str(path)).returncode == 0


def test_baselines_change_only_when_asked_and_say_why(tmp_path):
    path = tmp_path / "baselines.json"
    files.save({}, path)
    refused = gpupool("bench", "figures", "--update", "--only", "roi", "--baselines", str(path))
    assert refused.returncode != 0 and "--update needs --why" in refused.stderr + refused.stdout
    assert files.load(path) == {}
    ran = _gate("--update", "--why", "ROI example", "--only", "roi", "--baselines", str(path))
    assert ran.returncode == 0, ran.stderr
    saved = files.load(path)
    assert saved["roi.q3.payback_months"].value == 2.14
    assert saved["roi.q3.payback_months"].why == "ROI example"
    assert saved["roi.q3.payback_months"].commit == files.head_commit()

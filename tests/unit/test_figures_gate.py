"""The figures gate (issue 58), pure: each verdict, what fails the gate, what the data's
absence does, how baselines are rewritten, and the catalogue run on an in-process runner."""

import json
from typing import Any

import pytest

from gpupool.bench.figures import baselines as files
from gpupool.bench.figures.catalog import GROUPS, ROI, SCENARIO
from gpupool.bench.figures.gate import check, compute, select
from gpupool.bench.figures.model import Baseline, Figure, judge
from gpupool.bench.figures.sources import Sources


def _figure(value: float | None, direction: str = "lower", **kw: Any) -> Figure:
    return Figure("f", value, direction, 1.0, "doc", **kw)  # type: ignore[arg-type]


def _base(value: float, direction: str = "lower", tolerance: float = 1.0) -> Baseline:
    return Baseline(value, tolerance, direction, "abc1234", "why")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("direction", "value", "status"),
    [
        ("lower", 101.0, "ok"),  # worse by the tolerance: still ok
        ("lower", 101.5, "worse"),
        ("lower", 98.5, "better"),
        ("higher", 99.0, "ok"),
        ("higher", 98.5, "worse"),
        ("higher", 101.5, "better"),
        ("equal", 101.5, "worse"),
        ("equal", 98.5, "worse"),
        ("equal", 100.5, "ok"),
    ],
)
def test_a_figure_is_judged_by_its_direction_and_tolerance(direction, value, status):
    verdict = judge(_figure(value, direction), _base(100.0, direction))
    assert verdict.status == status
    assert verdict.fails == (status == "worse")


def test_a_failure_names_the_figure_its_baseline_and_the_new_value():
    verdict = judge(
        Figure("scenario.pooled", 0.6992, "higher", 0.005, "d"), _base(0.7265, "higher", 0.005)
    )
    assert verdict.fails
    for words in ("scenario.pooled", "0.6992", "baseline 0.7265", "abc1234"):
        assert words in verdict.message


def test_a_limit_fails_whatever_the_baseline_says():
    inside = judge(_figure(105.0, limit=106.0, limit_why="paper + 5%"), _base(105.0))
    past = judge(_figure(107.0, limit=106.0, limit_why="paper + 5%"), _base(107.0))
    assert inside.status == "ok"
    assert past.status == "out of band" and "paper + 5%" in past.message


def test_no_baseline_and_no_value_fail_but_absent_data_only_when_required():
    assert judge(_figure(1.0), None).fails
    assert judge(_figure(None, missing="computed, but no value"), _base(1.0)).fails
    absent = _figure(None, missing="not computed: set GPUPOOL_OPENB_DIR", data_missing=True)
    relaxed, strict = (
        check([absent], {"f": _base(1.0)}, False),
        check([absent], {"f": _base(1.0)}, True),
    )
    assert relaxed.passed and not strict.passed
    assert "not computed: set GPUPOOL_OPENB_DIR" in " ".join(relaxed.summary())
    assert "GPUPOOL_REQUIRE_FIGURES is set" in " ".join(strict.summary())


def test_figures_without_their_data_are_listed_by_name_as_not_computed():
    nothing = Sources(None, "not computed: set GPUPOOL_OPENB_DIR (…)", None, None,
                      "not computed: set GPUPOOL_SERVEGEN_DIR (…)")  # fmt: skip
    needing = [g for g in GROUPS if g.name not in ("scenario", "roi")]

    def never(*_: Any) -> dict[str, Any]:
        raise AssertionError("nothing to run")

    figures, _ = compute(needing, nothing, 1, runner=never)
    assert figures and all(f.value is None and f.data_missing for f in figures)
    report = check(figures, files.load(), required=False)
    assert report.passed and len(report.not_computed) == len(figures)
    assert {f.missing.split(" (")[0] for f in figures} == {
        "not computed: set GPUPOOL_OPENB_DIR",
        "not computed: set GPUPOOL_SERVEGEN_DIR",
    }


def _inline(tasks, workers, progress=None) -> dict[str, Any]:
    """The runner without processes: the unit tier runs none."""
    return {**{t.key: t.fn(*t.args) for t in tasks}, "seconds": {t.key: 0.0 for t in tasks}}


def test_the_roi_figures_pass_on_their_baselines_and_fail_on_a_stricter_one():
    figures, _ = compute([ROI], Sources(None), 1, runner=_inline)
    assert {f.name: f.value for f in figures}["roi.q3.cards_freed"] == 28
    shipped = files.load()
    assert check(figures, shipped, required=True).passed
    stricter = {**shipped, "roi.q3.cards_freed": _base(29.0, "equal", 0.0)}
    report = check(figures, stricter, required=True)
    assert [v.name for v in report.failures] == ["roi.q3.cards_freed"]
    assert "roi.q3.cards_freed = 28, baseline 29" in report.summary()[0]


def test_every_figure_of_the_catalogue_has_a_baseline_and_its_direction():
    shipped = files.load()
    names = [spec.name for g in GROUPS for spec in g.specs]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(shipped)
    for g in GROUPS:
        for spec in g.specs:
            assert shipped[spec.name].direction == spec.direction, spec.name
            assert shipped[spec.name].why and shipped[spec.name].commit


def test_update_keeps_tolerance_and_direction_and_records_commit_and_why(tmp_path):
    old = {"f": _base(100.0, "lower", 2.0), "g": _base(5.0)}
    figures = [
        _figure(98.0),  # f moved
        Figure("g", 5.0, "lower", 1.0, "d"),  # g did not
        Figure("h", 7.0, "higher", 0.5, "d"),  # h is new
        Figure("k", None, "lower", 1.0, "d", missing="x", data_missing=True),  # k not computed
    ]
    new, changed = files.updated(old, figures, "def5678", "faster FGD")
    assert changed == ["f", "h"]
    assert new["f"] == Baseline(98.0, 2.0, "lower", "def5678", "faster FGD")
    assert new["g"] == old["g"] and "k" not in new
    assert new["h"].direction == "higher" and new["h"].tolerance == 0.5
    path = tmp_path / "b.json"
    files.save(new, path)
    assert files.load(path) == new
    assert "--why" in json.loads(path.read_text())["about"]


def test_bad_baselines_and_unknown_groups_are_refused_by_name(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"figures": {"f": {"value": 1, "tolerance": 0, "direction": "up",
                                                  "commit": "c", "why": "w"}}}))  # fmt: skip
    with pytest.raises(ValueError, match="baseline f: direction 'up'"):
        files.load(path)
    with pytest.raises(ValueError, match="unknown figure group"):
        select(["scenario", "nope"])
    assert select(["scenario"]) == [SCENARIO]

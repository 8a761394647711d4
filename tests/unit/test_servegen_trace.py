"""The ServeGen request-rate loader, on the excerpt shipped in tests/data (two real clients of
the m-large model, Apache-2.0) and on broken files: bad rows named with file and line."""

import pytest

from gpupool.model import SpecError
from gpupool.sim.traces.servegen import WINDOW_S, load_rates
from tests.support.paths import DATA

EXCERPT = DATA / "servegen" / "m-large"


def test_the_excerpt_is_two_weeks_of_a_day_and_night_curve():
    trace, skipped = load_rates(EXCERPT)
    assert skipped == [] and sorted(trace.clients) == ["chunk-142", "chunk-61"]
    assert trace.window_s == WINDOW_S and trace.windows == 14 * 144  # 2,016 ten-minute windows
    hourly = trace.total.reshape(-1, 6).mean(axis=1)
    assert hourly.max() > 3 * hourly.min() > 0  # real swings, not a flat line
    daily = trace.total.reshape(14, 144).sum(axis=1)
    assert daily.max() > 1.2 * daily.min()  # and days that differ


def test_bad_rows_are_named_and_skipped_or_refused(tmp_path):
    (tmp_path / "a-trace.csv").write_text("0,1.5,1,Gamma,1,1\n600,x,,,,\n1200,-2,,,,\n1500,1,,,,\n")
    (tmp_path / "b-trace.csv").write_text("0,0,,,,\n600,2,1,Weibull,0.5,1\n")
    trace, skipped = load_rates(tmp_path)
    assert skipped == [
        "a-trace.csv: line 2: timestamp_s and rate_req_per_s must be numbers",
        "a-trace.csv: line 3: a negative or non-finite time or rate",
        "a-trace.csv: line 4: timestamp 1500 is not on a 600-s window",
    ]
    assert list(trace.total) == [1.5, 2.0]
    with pytest.raises(SpecError, match=r"a-trace.csv: 3 bad row\(s\): line 2"):
        load_rates(tmp_path, strict=True)
    with pytest.raises(SpecError, match="GPUPOOL_SERVEGEN_DIR names data/language"):
        load_rates(tmp_path / "nowhere")

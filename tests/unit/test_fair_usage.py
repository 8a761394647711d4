"""The server's side of fair share: its aged sums and the cards a live placement holds."""

import pytest

from gpupool.scheduler.fairshare import UsageHistory, decayed_card_hours
from gpupool.server.fair_usage import aged
from gpupool.server.fair_view import _card_percent

H = 3600.0


def test_a_sum_aged_one_half_life_is_halved_and_matches_the_records_read_then():
    # two records read at t=0, and the same records read again a half-life later
    records = [(4 * H, -10 * H, -2 * H), (2 * H, -5 * H, -1 * H)]  # card-seconds, start, end
    at = {
        t: sum(decayed_card_hours(c, s, e, t, 24 * H) for c, s, e in records) for t in (0, 24 * H)
    }
    history = UsageHistory(24 * H, {"a": at[0]}, {"a": at[0]})
    later = aged(history, 24 * H)
    assert later.borrowed["a"] == pytest.approx(at[0] / 2) == pytest.approx(at[24 * H])
    assert later.used["a"] == later.borrowed["a"] and later.half_life_s == 24 * H


def test_a_placement_holds_whole_cards_slices_and_shares_in_percent():
    placement = {"nodes": [
        {"node": "n0", "devices": [{"device": 0, "compute_pct": 100},
                                   {"device": 1, "compute_pct": 30}]},
        {"node": "n1", "devices": [{"device": 0, "compute_pct": 0, "mig_profile": "3g.40gb"}]},
    ]}  # fmt: skip
    assert _card_percent(placement) == 100 + 30 + 43  # 3g: 3 of 7 compute slices, 43%

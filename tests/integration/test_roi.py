import json

import pytest

from gpupool.billing.catalog import monthly_price_fen
from gpupool.model import SpecError
from gpupool.sim.roi import roi
from tests.support.cli import gpupool


def test_the_seeds_q3_case_done_honestly():
    # 50 x A100-80G at ¥2,500, utilisation 30% -> 70%, platform ¥150k-300k
    low = roi(50, 0.30, 0.70, monthly_price_fen("A100-80G"), 150_000 * 100)
    high = roi(50, 0.30, 0.70, monthly_price_fen("A100-80G"), 300_000 * 100)
    assert (low.cards_needed, low.cards_freed) == (22, 28)  # 15 / 0.7 = 21.4 -> 22
    assert low.monthly_saving == 70_000 and low.monthly_saving_fen == 7_000_000
    assert (low.payback_months, high.payback_months) == (2.14, 4.29)


def test_headroom_for_virtualisation_costs_cards():
    r = roi(50, 0.30, 0.70, 250_000, 15_000_000, headroom=0.15)
    assert (r.cards_needed, r.cards_freed, r.monthly_saving) == (26, 24, 60_000)


def test_no_gain_means_no_payback():
    r = roi(10, 0.5, 0.5, 250_000, 1_000_000)
    assert r.cards_freed == 0 and r.payback_months is None


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((0, 0.3, 0.7, 1, 1), "--cards must be positive"),
        ((10, 0.0, 0.7, 1, 1), "--util-before must be in"),
        ((10, 0.8, 0.7, 1, 1), "saves nothing"),
        ((10, 0.3, 1.5, 1, 1), "--util-after must be in"),
    ],
)
def test_bad_input_is_refused(args, needle):
    with pytest.raises(SpecError, match=needle):
        roi(*args)


def test_cli_json_and_unknown_price():
    base = [
        "simulate",
        "roi",
        "--cards",
        "50",
        "--util-before",
        "0.30",
        "--util-after",
        "0.70",
        "--platform-cost",
        "150000",
    ]
    out = gpupool(*base, "--model", "A100-80G", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["monthly_saving"], data["payback_months"], data["currency"]) == (
        70000.0,
        2.14,
        "CNY",
    )
    bad = gpupool(*base, "--model", "L40S")
    assert bad.returncode == 2 and "no monthly price for L40S" in bad.stderr

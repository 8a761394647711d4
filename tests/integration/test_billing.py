"""Billing maths (pure): money in fen, one rounding rule, effective-dated prices, rental plan
quotes as the issue and the seed state them."""

import json
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.billing.catalog import Catalog, Price
from gpupool.billing.invoice import Task, Usage, invoice, month_bounds
from gpupool.billing.money import cny, parse_cny, to_fen
from gpupool.billing.plans import quote
from gpupool.model import SpecError
from tests.support.cli import gpupool


def test_the_issues_quotes():
    c = Catalog.default()
    annual = quote(c, "A100-80G", 1, "annual", 1, 0)
    assert annual["total"] == "25500.00"  # 2,500 x 12 x 0.85
    assert quote(c, "T4", 4, "hourly", 720, 0)["total"] == "3600.00"  # 900 / 720 x 2,880
    assert quote(c, "H100-80G", 8, "monthly", 1, 0)["total"] == "100000.00"  # the 8-card server
    daily = quote(c, "A100-80G", 2, "daily", 3, 0)
    assert daily["lines"][0]["unit_price"] == "83.333333" and daily["total"] == "500.00"


def test_rounding_is_half_even_once_per_line():
    assert [to_fen(Fraction(n, 2)) for n in (1, 3, 5, -1)] == [0, 2, 2, 0]
    assert to_fen(Fraction(2501, 10)) == 250
    assert cny(2550000) == "25500.00" and cny(5) == "0.05" and cny(-120) == "-1.20"
    assert parse_cny("2500") == 250000 and parse_cny("0.5") == 50 and parse_cny("12.34") == 1234
    for bad in ("-1", "1.234", "1e3", "", "1,000", "¹", "1.²", "٣"):
        with pytest.raises(SpecError, match="is not an amount in CNY"):
            parse_cny(bad)


@given(st.integers(0, 10**12 - 1))  # up to 9,999,999,999.99 CNY
def test_cny_strings_parse_back(fen):
    assert parse_cny(cny(fen)) == fen


def test_amounts_past_ten_digits_of_cny_are_refused():
    with pytest.raises(SpecError, match=r"is above 9,999,999,999\.99 CNY"):
        parse_cny(cny(10**12))


def test_prices_are_effective_dated():
    c = Catalog([Price("A100-80G", 250000, 0), Price("A100-80G", 200000, 1000.0)])
    assert c.at("A100-80G", 999).monthly_fen == 250000
    assert c.at("a100-80g", 1000).monthly_fen == 200000  # model names are canonical
    assert c.boundaries("A100-80G", 0, 2000) == [1000.0]
    assert c.at("A100-80G", 0).hourly() == Fraction(250000, 720)
    assert c.at("A100-80G", 0).gb_hour() == Fraction(250000, 720 * 80)
    with pytest.raises(SpecError, match="no price for A100-40G"):
        c.at("A100-40G", 0)
    with pytest.raises(SpecError, match="no price for A100-80G in force"):
        Catalog([Price("A100-80G", 1, 50.0)]).at("A100-80G", 10)


def test_billing_quote_cli():
    r = gpupool("billing", "quote", "--model", "A100-80G", "--cards", "1", "--plan", "annual",
                "--periods", "1", "--json")  # fmt: skip
    out = json.loads(r.stdout)
    assert out["total"] == "25500.00" and out["lines"][0]["amount"] == "25500.00"
    r = gpupool("billing", "quote", "--model", "T4", "--plan", "weekly")
    assert r.returncode == 2 and "plan: 'weekly' is not one of" in r.stderr
    r = gpupool("billing", "quote", "--model", "T4", "--cards", "0")
    assert r.returncode == 2 and "at least 1" in r.stderr


HOUR = 3600


def _card(start: float, hours: float, pct: int = 100, mib: int = 81920) -> Usage:
    seconds = round(hours * HOUR)
    return Usage("A100-80G", start, start + seconds, pct * seconds, mib * seconds)


def test_an_invoice_bills_card_hours_at_the_price_in_force():
    start, end = month_bounds("2026-11")  # Asia/Shanghai: 2026-10-31T16:00Z
    assert end - start == 30 * 86400
    full = invoice("algo", "2026-11", [_card(start, 720)], Catalog.default())
    assert full["total"] == "2500.00" and full["lines"][0]["quantity"] == "720.0000"
    half = invoice("algo", "2026-11", [_card(start, 720, pct=50)], Catalog.default())
    assert half["total"] == "1250.00"  # a 50% share bills its fraction
    # four hours across the month's start: two in October, two in November
    edge = invoice("algo", "2026-11", [_card(start - 2 * HOUR, 4)], Catalog.default())
    assert edge["lines"][0]["quantity"] == "2.0000" and edge["total"] == "6.94"
    october = invoice("algo", "2026-10", [_card(start - 2 * HOUR, 4)], Catalog.default())
    assert october["total"] == "6.94"
    # a price change mid-month: each part at its price, one line each
    cheaper = Catalog([Price("A100-80G", 250000, 0), Price("A100-80G", 180000, start + 15 * 86400)])
    split = invoice("algo", "2026-11", [_card(start, 720)], cheaper)
    assert [line["amount"] for line in split["lines"]] == ["1250.00", "900.00"]
    assert split["total"] == "2150.00" and split["total_fen"] == 215000
    # the same month in UTC has different bounds
    assert invoice("algo", "2026-11", [], Catalog.default(), zone="UTC")["period"]["start"] == (
        start + 8 * HOUR
    )


def test_gpu_memory_and_per_task_modes():
    start, _ = month_bounds("2026-11")
    mem = invoice("algo", "2026-11", [_card(start, 720)], Catalog.default(), mode="gpu-mem")
    assert mem["lines"][0]["unit"] == "GB-hour" and mem["total"] == "2500.00"
    tasks = [Task(i, "training", start + i) for i in range(3)] + [Task(9, "dev-test", start - 1)]
    per = invoice("algo", "2026-11", [], Catalog.default(), mode="per-task", tasks=tasks,
                  task_prices={"training": 1000})  # fmt: skip
    assert per["total"] == "30.00" and per["lines"][0]["quantity"] == "3.0000"
    with pytest.raises(SpecError, match="no per-task price for class 'training'"):
        invoice("algo", "2026-11", [], Catalog.default(), mode="per-task", tasks=tasks)
    with pytest.raises(SpecError, match="month: '2026-13' is not YYYY-MM"):
        invoice("algo", "2026-13", [], Catalog.default())
    with pytest.raises(SpecError, match="unknown time zone 'Mars/Base'"):
        invoice("algo", "2026-11", [], Catalog.default(), zone="Mars/Base")


@given(st.lists(st.tuples(st.integers(0, 60 * 86400), st.integers(1, 86400), st.sampled_from(
    [25, 50, 100, 200])), max_size=20))  # fmt: skip
def test_a_records_parts_bill_in_the_months_they_fall_in(spans):
    """Billing October and November separately costs what billing the records whole would,
    to within a fen a line: no second is billed twice or lost at a month's edge."""
    start, _ = month_bounds("2026-10")
    records = [_card(start + a, n / HOUR, pct) for a, n, pct in spans]
    months = [invoice("t", m, records, Catalog.default()) for m in ("2026-10", "2026-11")]
    exact = sum(Fraction(r.compute_pct_seconds, 100 * HOUR) for r in records) * Fraction(
        250000, 720
    )
    billed = sum(m["total_fen"] for m in months)
    assert abs(billed - exact) <= 1  # one line a month, each rounded once


def test_rental_plans_bill_their_price_and_only_use_beyond_them():
    from gpupool.billing.plans import new_plan

    start, end = month_bounds("2026-11")  # 30 days: one monthly period exactly
    c = Catalog.default()
    plan = new_plan(c, 1, "algo", "A100-80G", 4, "monthly", 1, start)
    assert (plan.total_fen, plan.end) == (1_000_000, end)
    within = [_card(start, 720) for _ in range(4)]
    out = invoice("algo", "2026-11", within, c, plans=[plan])
    assert [line["amount"] for line in out["lines"]] == ["10000.00"]
    assert out["lines"][0]["description"] == "plan 1: 4 x A100-80G, monthly"
    # two cards more all month: billed on demand; a T4 without a plan as usual
    more = [*within, _card(start, 720), _card(start, 720)]
    t4 = Usage("T4", start, start + 3600, 100 * 3600, 0)
    out = invoice("algo", "2026-11", [*more, t4], c, plans=[plan])
    amounts = {line["description"]: line["amount"] for line in out["lines"]}
    assert amounts["A100-80G beyond plans (card-hours)"] == "5000.00"
    assert amounts["T4 (card-hours)"] == "1.25" and out["total"] == "15001.25"
    # eight cards for the first week only: four beyond the plan for 168 hours; idle plan
    # cards later in the month do not offset that week
    week = [_card(start, 168) for _ in range(8)]
    out = invoice("algo", "2026-11", week, c, plans=[plan])
    assert out["lines"][1]["quantity"] == "672.0000"  # 4 x 168 card-hours
    # cancelled after ten days: its guarantee ends then, but the month it started is owed
    cancelled = replace(plan, cancelled_at=start + 10 * 86400)
    assert not cancelled.active(start + 11 * 86400) and cancelled.active(start)
    out = invoice("algo", "2026-11", [], c, plans=[cancelled])
    assert out["total"] == "10000.00"
    assert [line["amount"] for line in out["lines"]] == ["3333.33", "6666.67"]
    assert out["lines"][1]["description"] == (
        "plan 1: cancelled early, owes 1 of 1 months; less what was billed"
    )
    # an annual plan is paid upfront: all of its discounted year when it starts
    year = new_plan(c, 2, "algo", "A100-80G", 1, "annual", 1, start)
    assert invoice("algo", "2026-11", [], c, plans=[year])["total"] == "25500.00"
    assert invoice("algo", "2026-12", [], c, plans=[year])["total"] == "0.00"
    # or monthly, as configured: November's 30 of its 365 days
    spread = new_plan(c, 2, "algo", "A100-80G", 1, "annual", 1, start, payment="monthly")
    assert invoice("algo", "2026-11", [], c, plans=[spread])["total"] == "2095.89"
    with pytest.raises(SpecError, match="payment: 'weekly' is not one of upfront, monthly"):
        new_plan(c, 3, "algo", "A100-80G", 1, "annual", 1, start, payment="weekly")


@pytest.mark.parametrize(
    ("kind", "periods", "after_s", "payment", "owed"),
    [
        # the issue's case: a year cancelled after 12 s was billed ¥0.02, a free 15% off
        ("annual", 1, 12, "upfront", "2500.00"),  # one month started, without the discount
        ("annual", 1, 12, "monthly", "2500.00"),
        ("annual", 1, 100 * 86400, "upfront", "10000.00"),  # 4 months started (of 30.4 days)
        ("annual", 1, 364 * 86400, "upfront", "25500.00"),  # never more than the year
        ("monthly", 3, 12, "monthly", "2500.00"),
        ("monthly", 3, 40 * 86400, "monthly", "5000.00"),
        ("daily", 7, 12, "monthly", "83.33"),  # a day: 24 hourly rates
        ("hourly", 720, 12, "monthly", "3.47"),
    ],
)
def test_a_plan_cancelled_early_owes_what_it_started(kind, periods, after_s, payment, owed):
    """Over all the months it touches, a plan cancelled early bills exactly the rule's
    amount, whatever its payment schedule."""
    from gpupool.billing.plans import new_plan

    start, _ = month_bounds("2026-11")
    c = Catalog.default()
    plan = new_plan(c, 1, "algo", "A100-80G", 1, kind, periods, start + 3600, payment)
    plan = replace(plan, cancelled_at=plan.start + after_s)
    months = [
        f"{y}-{m:02d}" for y, m in [(2026, 11), (2026, 12), *((2027, i) for i in range(1, 12))]
    ]
    bills = [invoice("algo", m, [], c, plans=[plan]) for m in months]
    billed = sum(b["total_fen"] for b in bills)
    lines = sum(len(b["lines"]) for b in bills)
    assert abs(billed - parse_cny(owed)) <= lines // 2  # each line rounded once, to the fen
    before = replace(plan, cancelled_at=plan.start - 60)  # cancelled before it started
    assert sum(invoice("algo", m, [], c, plans=[before])["total_fen"] for m in months) == 0


def test_a_plan_that_ended_with_last_month_leaves_this_months_usage_alone():
    """A month's plan over all of November ends on December's first second: December's use
    is plain usage, not use "beyond" a plan that no longer runs."""
    from gpupool.billing.plans import new_plan

    c = Catalog.default()
    plan = new_plan(c, 1, "algo", "A100-80G", 1, "monthly", 1, month_bounds("2026-11")[0])
    december, _ = month_bounds("2026-12")
    assert plan.end == december
    used = [Usage("A100-80G", december, december + HOUR, 100 * HOUR, 0)]
    lines = invoice("algo", "2026-12", used, c, plans=[plan])["lines"]
    assert [line["description"] for line in lines] == ["A100-80G (card-hours)"]
    # cancelled on December's first second (it had ended): still no line of its own
    cancelled = replace(plan, cancelled_at=december)
    assert invoice("algo", "2026-12", [], c, plans=[cancelled])["lines"] == []


def test_a_plan_is_billed_by_card_hour():
    from gpupool.billing.plans import new_plan

    start, _ = month_bounds("2026-11")
    c = Catalog.default()
    plan = new_plan(c, 1, "algo", "A100-80G", 4, "monthly", 1, start)
    with pytest.raises(SpecError, match="billed by card-hour"):
        invoice("algo", "2026-11", [], c, plans=[plan], mode="gpu-mem")


def test_reports_split_days_rank_jobs_and_price_idle_cards():
    from gpupool.billing.reports import IdleHold, JobUsage, daily_usage, idle_costs, job_costs

    start, end = month_bounds("2026-11")  # local midnight in Asia/Shanghai
    across = JobUsage(
        "algo", 7, "A100-80G", start + 86400 - 2 * HOUR, start + 86400 + HOUR, 300 * HOUR
    )
    rows = daily_usage([across], start, end, "Asia/Shanghai")
    assert rows == [
        {"tenant": "algo", "model": "A100-80G", "day": "2026-11-01", "card_hours": 2.0},
        {"tenant": "algo", "model": "A100-80G", "day": "2026-11-02", "card_hours": 1.0},
    ]
    small = JobUsage("beta", 8, "T4", start, start + HOUR, 100 * HOUR)
    top = job_costs([small, across], Catalog.default(), start, end)
    assert [(t["job_id"], t["cost"]) for t in top] == [(7, "10.42"), (8, "1.25")]
    assert job_costs([small, across], Catalog.default(), start, end, limit=1)[0]["job_id"] == 7
    idle = idle_costs(
        [
            IdleHold("algo", 7, "A100-80G", 100 * 2 * HOUR, start),
            IdleHold("algo", 9, "A100-80G", 50 * HOUR, start, interactive=True),
            IdleHold("beta", 8, "T4", 0, start),
        ],
        Catalog.default(),
    )
    assert idle == [{"tenant": "algo", "idle_card_hours": 2.5, "idle_cost": "8.68",
                     "interactive_idle_card_hours": 0.5}]  # fmt: skip


records_strategy = st.lists(
    st.tuples(st.integers(-5 * 86400, 35 * 86400), st.integers(0, 3 * 86400),
              st.sampled_from([14, 25, 50, 100, 200, 800]), st.sampled_from(["A100-80G", "T4"])),
    max_size=15,
)  # fmt: skip


def _records(spans) -> list[Usage]:
    start, _ = month_bounds("2026-11")
    return [Usage(m, start + a, start + a + n, pct * n, 16384 * n) for a, n, pct, m in spans]


@given(records_strategy, st.integers(0, 8), st.sampled_from(["card-hour", "gpu-mem"]))
def test_an_invoice_total_is_the_sum_of_its_lines(spans, plan_cards, mode):
    from gpupool.billing.money import parse_cny
    from gpupool.billing.plans import new_plan

    start, _ = month_bounds("2026-11")
    c = Catalog.default()
    plans = []
    if plan_cards and mode == "card-hour":
        plans = [new_plan(c, 1, "t", "A100-80G", plan_cards, "daily", 9, start + 86400)]
    out = invoice("t", "2026-11", _records(spans), c, mode=mode, plans=plans)
    assert out["total_fen"] == sum(parse_cny(line["amount"]) for line in out["lines"])
    assert parse_cny(out["total"]) == out["total_fen"]


@given(records_strategy, st.data())
def test_splitting_a_record_anywhere_changes_no_bill_beyond_rounding(spans, data):
    records = [r for r in _records(spans) if r.end - r.start >= 2]
    if not records:
        return
    i = data.draw(st.integers(0, len(records) - 1))
    r = records[i]
    seconds = round(r.end - r.start)
    cut = data.draw(st.integers(1, seconds - 1))
    pct = r.compute_pct_seconds // seconds
    split = [
        Usage(r.model, r.start, r.start + cut, pct * cut, 16384 * cut),
        Usage(r.model, r.start + cut, r.end, pct * (seconds - cut), 16384 * (seconds - cut)),
    ]
    c = Catalog.default()
    whole = invoice("t", "2026-11", records, c)
    parts = invoice("t", "2026-11", [*records[:i], *split, *records[i + 1 :]], c)
    assert abs(whole["total_fen"] - parts["total_fen"]) <= len(whole["lines"]) + 1


@given(records_strategy, st.integers(1, 10**6), st.integers(0, 60 * 86400))
def test_a_price_change_after_a_month_closed_leaves_it_unchanged(spans, fen, after):
    _, end = month_bounds("2026-11")
    before = Catalog.default()
    changed = Catalog([*(p for ps in before.by_model.values() for p in ps),
                       Price("A100-80G", fen, end + after)])  # fmt: skip
    records = _records(spans)
    assert invoice("t", "2026-11", records, changed) == invoice("t", "2026-11", records, before)


def test_bench_billing_reports_records_and_seconds():
    r = gpupool("bench", "billing", "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["cards"] == 40 and out["usage_records"] > 1000 and out["seconds"] >= 0
    small, large = out["runs"]
    assert large["cards"] == 1000 and large["usage_records"] > 20 * small["usage_records"]
    assert set(small["totals"]) == {"algorithm", "inference", "devtest"}
    r = gpupool("bench", "billing", "--scenario", "nowhere.yaml")
    assert r.returncode == 2 and "scenario: nowhere.yaml not found" in r.stderr

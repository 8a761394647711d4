"""An invoice's usage lines while a job runs across a price change (issue 59, finding 3): the
part before the change is closed — its quantity must not move as the job runs on (it moved
0.5293 → 0.5308 → 0.5288: the split was by fractional time, the metering by whole seconds) —
and the two lines of one model are told apart by their dates."""

import math

from gpupool.billing.catalog import Catalog, Price
from gpupool.billing.invoice import Usage, invoice, month_bounds, parts
from gpupool.billing.invoice_csv import invoice_csv
from gpupool.billing.invoice_html import invoice_html

ZONE = "Asia/Shanghai"
START, END = month_bounds("2027-01", ZONE)
CHANGE = START + 14 * 86400  # 2027-01-15 00:00 +08:00
CATALOG = Catalog([Price("A100-80G", 2500_00), Price("A100-80G", 2300_00, CHANGE)])


def _running(since: float, now: float, cards: int = 3) -> Usage:
    """What a live allocation metered so far: whole seconds of [since, now), as metering."""
    seconds = math.floor(now) - math.floor(since)
    return Usage("A100-80G", since, now, 100 * cards * seconds, 81920 * cards * seconds)


def test_the_part_before_a_price_change_stays_as_the_job_runs_on():
    since = CHANGE - 1905.6  # its last checkpoint, at a fraction of a second
    before = []
    for now in (CHANGE + 0.9, CHANGE + 7.2, CHANGE + 31.5, CHANGE + 400.05, CHANGE + 3599.99):
        inv = invoice("algo", "2027-01", [_running(since, now)], CATALOG, zone=ZONE)
        first, second = inv["lines"]
        before.append((first["quantity"], first["amount"]))
        assert first["item"]["to"] == second["item"]["from"] == CHANGE
    closed = 3 * (math.floor(CHANGE) - math.floor(since)) / 3600
    assert set(before) == {(f"{closed:.4f}", before[0][1])}, before


def test_whole_second_shares_add_up_and_follow_the_seconds_metered():
    u = _running(100.7, 200.2)  # 100 whole seconds: floor(200.2) - floor(100.7)
    pieces = parts(u, 0, 1000, [150.5, 170.0])
    assert sum(share for *_, share in pieces) == 1
    assert [share * 100 for *_, share in pieces] == [50, 20, 30]  # 100→150, 150→170, 170→200


def test_a_mid_month_price_change_dates_its_two_lines():
    records = [
        Usage("A100-80G", START + 86400, START + 86400 + 3600, 360000, 0),
        Usage("A100-80G", CHANGE + 86400, CHANGE + 86400 + 7200, 720000, 0),
    ]
    inv = invoice("algo", "2027-01", records, CATALOG, zone=ZONE)
    old, new = inv["lines"]
    assert old["description"] != new["description"]
    assert old["description"] == (
        "A100-80G (card-hours), 2027-01-01 00:00 to 2027-01-15 00:00 +08:00"
    )
    assert new["description"] == (
        "A100-80G (card-hours), 2027-01-15 00:00 to 2027-02-01 00:00 +08:00"
    )
    assert (old["item"]["from"], old["item"]["to"]) == (START, CHANGE)
    assert (new["item"]["from"], new["item"]["to"]) == (CHANGE, END)
    assert (old["quantity"], new["quantity"]) == ("1.0000", "2.0000")
    for lang, words in (("en", ("2027-01-01 00:00", "2027-01-15 00:00")), ("zh", ("至",))):
        page = invoice_html(inv, lang, START)
        assert all(w in page for w in words), lang
    assert "2027-01-15 00:00 to 2027-02-01 00:00 +08:00" in invoice_csv(inv)


def test_a_month_at_one_price_keeps_its_plain_line():
    records = [Usage("A100-80G", END + 86400, END + 86400 + 3600, 360000, 0)]
    (line,) = invoice("algo", "2027-02", records, CATALOG, zone=ZONE)["lines"]
    assert line["description"] == "A100-80G (card-hours)" and "from" not in line["item"]


def test_a_draft_says_what_moment_it_counts_to():
    inv = invoice("algo", "2027-01", [_running(START + 10, START + 7210)], CATALOG, zone=ZONE)
    inv |= {"draft": True, "as_of": START + 7210}
    assert "2027-01-01 02:00 +08:00" in invoice_html(inv, "en", START + 7300)
    assert "2027-01-01 02:00 +08:00" in invoice_html(inv, "zh", START + 7300)
    assert "2027-01-01T02:00:10+08:00" in invoice_csv(inv)

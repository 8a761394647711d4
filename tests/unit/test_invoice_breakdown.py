"""Who used an invoice's card-hours (issue 47: the invoice PDF had no per-job or per-user
breakdown, no guaranteed vs borrowed hours, and no issuer)."""

from gpupool.billing.breakdown import JobUsage, breakdown, descendants, sub_teams
from gpupool.billing.catalog import Catalog, Price
from gpupool.billing.invoice import Usage, invoice
from gpupool.billing.invoice_html import invoice_html

H = 3600
START, END = 100 * H, 200 * H


def _use(job, user, borrowed, start, hours, pct=100, model="A100-80G"):
    return JobUsage(job, user, f"train-{job}", borrowed, model, start, start + hours * H,
                    pct * hours * H)  # fmt: skip


RECORDS = [
    _use(1, "ann", False, START + H, 2),  # 2 card-hours inside
    _use(2, "bob", True, START - H, 2),  # half inside the period: 1 card-hour, borrowed
    _use(3, "ann", False, START, 4, pct=25),  # a quarter card for 4 hours: 1 card-hour
    _use(4, "cat", False, START, 5, model="cpu"),  # CPU comes with the cards
]


def test_card_hours_by_user_and_job_within_the_guarantee_and_borrowed():
    b = breakdown(RECORDS, START, END)
    assert (b["card_hours"], b["guaranteed_card_hours"], b["borrowed_card_hours"]) == (
        "4.0000", "3.0000", "1.0000",
    )  # fmt: skip
    assert [(u["user"], u["jobs"], u["card_hours"]) for u in b["by_user"]] == [
        ("ann", 2, "3.0000"),
        ("bob", 1, "1.0000"),
    ]
    assert [(j["job"], j["card_hours"], j["borrowed_card_hours"]) for j in b["by_job"]] == [
        (1, "2.0000", "0.0000"),
        (2, "1.0000", "1.0000"),
        (3, "1.0000", "0.0000"),
    ]
    assert b["jobs_left_out"] == 0
    short = breakdown(RECORDS, START, END, top=1)
    assert [j["job"] for j in short["by_job"]] == [1] and short["jobs_left_out"] == 2


def test_the_page_names_its_issuer_and_who_used_what_in_both_languages():
    usage = [Usage(u.model, u.start, u.end, u.compute_pct_seconds, 0) for u in RECORDS]
    catalog = Catalog([Price("A100-80G", 72000)])
    inv = {
        **invoice("algo", "1970-01", usage, catalog),
        "breakdown": breakdown(RECORDS, START, END),
    }
    zh = invoice_html({**inv, "issuer": "AI 平台部"}, "zh", START)
    assert '<dd id="issuer">AI 平台部</dd>' in zh
    assert "共 4.00 卡时：保障额度内 3.00，借用他人空闲 1.00" in zh
    assert '<td>ann</td><td class="num">2</td><td class="num">3.00</td>' in zh
    en = invoice_html(inv, "en", START)
    assert "4.00 card-hours: 3.00 within the guarantee, 1.00 on capacity borrowed" in en
    assert 'id="issuer"' not in en  # no issuer set: no empty line
    old = invoice_html({k: v for k, v in inv.items() if k != "breakdown"}, "en", START)
    assert "Who used it" not in old  # an invoice finalised before breakdowns still prints


def test_a_parents_invoice_lists_its_sub_teams_from_their_own_invoices():
    parents = {"company": None, "research": "company", "vision": "research", "nlp": "research",
               "ops": "company"}  # fmt: skip
    assert descendants("research", parents) == ["nlp", "vision"]
    assert descendants("company", parents) == ["nlp", "ops", "research", "vision"]
    bodies = {
        "vision": {"total": "12.50", "breakdown": {"card_hours": "5.0000"}},
        "nlp": {"total": "2.50", "breakdown": {"card_hours": "1.0000"}},
    }
    teams = sub_teams("research", parents, bodies)
    assert [(t["tenant"], t["card_hours"], t["total"]) for t in teams] == [
        ("nlp", "1.0000", "2.50"),
        ("vision", "5.0000", "12.50"),
    ]
    usage = [Usage(u.model, u.start, u.end, u.compute_pct_seconds, 0) for u in RECORDS[:1]]
    inv = invoice("research", "1970-01", usage, Catalog([Price("A100-80G", 72000)]))
    page = invoice_html({**inv, "sub_teams": teams}, "en", START)
    assert "Sub-teams (billed on their own invoices, not in this total)" in page
    assert '<td>vision</td><td class="num">5.00</td><td class="num">¥12.50</td>' in page

"""Month-end invoicing in one command ("月底一键出账单"): every tenant's invoice as a draft,
made again by each run, then final — numbered, frozen, exported as PDF, HTML and CSV. The PDF
is checked the way a person would: its page turned into an image, with its text on it."""

import ctypes
import json
import os
import re
import subprocess
import time

import pypdfium2
import pypdfium2.raw as pdfium_c
from sqlalchemy import select

from gpupool.billing.invoice import month_bounds
from gpupool.billing.invoice_pdf import has_cjk_font
from gpupool.server.db.tables import AllocationRow
from tests.support.builders import usage_record
from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster, started, submit


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.strip().lower())


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def _fonts(page: pypdfium2.PdfPage) -> set[str]:
    """The base font names of a page's text (PDF fonts sit in compressed object streams)."""
    names = set()
    for obj in page.get_objects():
        if obj.type == pdfium_c.FPDF_PAGEOBJ_TEXT:
            font = pdfium_c.FPDFTextObj_GetFont(obj.raw)
            size = pdfium_c.FPDFFont_GetBaseFontName(font, None, 0)
            buf = ctypes.create_string_buffer(size)
            pdfium_c.FPDFFont_GetBaseFontName(font, buf, size)
            names.add(buf.value.decode())
    return names


def _issue(client, month: str = "2026-11", final: bool = False):
    return client.post("/api/v1/billing/invoices/issue", json={"month": month, "final": final})


def test_drafts_then_final_numbered_invoices_that_never_change(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4, "beta": 2, "idle": 1})
    start, _ = month_bounds("2026-11")
    usage_record(server, "algo", start, 720)  # ¥2,500.00
    usage_record(server, "beta", start, 10)
    drafts = ok(_issue(admin))
    assert [(d["tenant"], d["state"], d["number"], d["total"]) for d in drafts] == [
        ("algo", "draft", None, "2500.00"),
        ("beta", "draft", None, "34.72"),
    ]  # idle had nothing to bill: no invoice
    usage_record(server, "beta", start + 86400, 10)  # a late correction: the next run has it
    assert ok(_issue(admin))[1]["total"] == "69.44"
    final = ok(_issue(admin, final=True))
    assert [(f["tenant"], f["state"], f["number"]) for f in final] == [
        ("algo", "final", "GP-202611-0001"),
        ("beta", "final", "GP-202611-0002"),
    ]
    # final means final: a rerun leaves them, usage or credits afterwards change nothing
    again = ok(_issue(admin, final=True))
    assert [(f["number"], f["changed"]) for f in again] == [
        ("GP-202611-0001", False),
        ("GP-202611-0002", False),
    ]
    usage_record(server, "algo", start + 3600, 5)
    issued = ok(admin.get(f"/api/v1/billing/invoices/{final[0]['id']}"))
    assert issued["total"] == "2500.00" and issued["number"] == "GP-202611-0001"
    assert issued["draft"] is False and issued["period"]["start"] == "2026-10-31T16:00:00Z"
    live = ok(admin.get("/api/v1/billing/invoice", params={"tenant": "algo", "month": "2026-11"}))
    assert live["total"] == "2517.36"  # the record added after: on no final invoice
    credit = {"tenant": "algo", "month": "2026-11", "amount": "10", "reason": "late"}
    r = admin.post("/api/v1/billing/credits", json=credit)
    assert r.status_code == 409 and "is final and never changes" in r.text
    csv = admin.get(f"/api/v1/billing/invoices/{final[0]['id']}", params={"format": "csv"}).text
    assert csv.splitlines()[0] == "number,GP-202611-0001,,," and csv.endswith(
        "total,,,,2500.00\r\n"
    )
    # who may issue and read
    finance = server.client(server.token("fay", "finance"))
    assert len(ok(finance.get("/api/v1/billing/invoices", params={"month": "2026-11"}))) == 2
    lead = server.client(server.token("lee", "tenant-admin", "beta"))
    assert [i["tenant"] for i in ok(lead.get("/api/v1/billing/invoices"))] == ["beta"]
    assert lead.get(f"/api/v1/billing/invoices/{final[0]['id']}").status_code == 404
    assert _issue(lead).status_code == 403
    scoped = server.client(server.token("fin", "finance", "beta"))
    assert _issue(scoped).status_code == 403
    member = server.client(server.token("mo", "member", "algo"))
    assert member.get("/api/v1/billing/invoices").status_code == 403


def test_a_month_is_finalised_only_when_over_and_metered_to_its_end(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    this_month = time.strftime("%Y-%m", time.gmtime(time.time() + 8 * 3600))
    r = _issue(admin, this_month, final=True)
    assert r.status_code == 409 and "is not over" in r.json()["detail"]
    assert r.json()["field"] == "month"
    job = submit(admin, "gpu=1", "algo")
    server.cycle(month_bounds("2026-11")[1] - 600)  # running since before December began
    started(admin, job)
    r = _issue(admin, "2026-11", final=True)
    assert r.status_code == 409 and "not metered up to the end of 2026-11" in r.text
    server.ctx.loop.checkpoint_usage()  # the hourly checkpoint closes November
    with server.ctx.db.read() as s:
        assert (
            s.execute(select(AllocationRow)).scalar_one().metered_until > month_bounds("2026-11")[1]
        )
    final = ok(_issue(admin, "2026-11", final=True))
    assert final[0]["total"] == "0.58"  # its 600 s of November, one card: 3.472222 x 1/6 h
    for body, field in (({"month": "2026-13"}, "month"), ({"month": "2026-11", "zone": "Mars/X"},
                        "zone")):  # fmt: skip
        r = admin.post("/api/v1/billing/invoices/issue", json=body)
        assert r.status_code == 422 and r.json()["field"] == field, r.text


def test_one_command_issues_the_month_and_saves_pdf_html_and_csv(sqlite_server, tmp_path):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4, "beta": 2})
    start, _ = month_bounds("2026-11")
    usage_record(sqlite_server, "algo", start, 720)
    usage_record(sqlite_server, "beta", start, 10)
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token,
           "COLUMNS": "80"}  # fmt: skip
    out = tmp_path / "2026-11"
    r = gpupool("billing", "issue", "--month", "2026-11", "--final", "--out", str(out),
                "--lang", "en", env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "GP-202611-0001" in r.stdout and "2 final made; saved in" in r.stdout
    assert max(map(len, r.stdout.splitlines())) <= 80
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"GP-202611-000{i}.{ext}" for i in (1, 2) for ext in ("csv", "html", "pdf")]
    pdf = pypdfium2.PdfDocument(out / "GP-202611-0001.pdf")
    assert len(pdf) == 1
    page = pdf[0]
    text = page.get_textpage().get_text_range()
    for expected in (
        "Invoice",
        "GP-202611-0001",
        "algo",
        "¥2,500.00",
        "A100-80G usage",
        "720 card-hours",
    ):
        assert expected in text, text
    image = page.render(scale=1).to_pil().convert("L")
    dark = sum(image.histogram()[:128]) / (image.width * image.height)
    assert 0.002 < dark < 0.2, dark  # printed text on a white page, not blank, not black
    width, height = image.size
    assert round(width / height, 2) == round(210 / 297, 2)  # A4
    listed = json.loads(
        gpupool("billing", "invoices", "--month", "2026-11", "--json", env=env).stdout
    )
    assert [i["number"] for i in listed] == ["GP-202611-0001", "GP-202611-0002"]
    r = gpupool("billing", "issue", "--month", "2026-11", "--out", str(out / "GP-202611-0001.pdf"),
                env=env)  # fmt: skip
    assert r.returncode == 2 and "is not a folder" in r.stderr
    # the live invoice exports as PDF too, and a Chinese page carries its Chinese labels
    zh = tmp_path / "algo.pdf"
    r = gpupool("billing", "invoice", "--tenant", "algo", "--month", "2026-11", "--pdf",
                str(zh), env=env)  # fmt: skip
    if not has_cjk_font():  # refused plainly, never boxes; CI installs a font (.ci/run)
        assert not os.environ.get("GPUPOOL_REQUIRE_CJK_FONT"), "no Chinese font installed"
        assert r.returncode == 1 and "no Chinese font is installed" in r.stderr, r.stderr
        return
    assert r.returncode == 0, r.stderr
    assert "合计" in pypdfium2.PdfDocument(zh)[0].get_textpage().get_text_range()
    # set in a Chinese font, not boxes: a PDF names a font by its PostScript name (Noto's
    # NotoSansCJKsc-Regular), fontconfig by families too; whichever the machine has
    listed = _run(["fc-list", ":lang=zh", "-f", "%{family}|%{postscriptname}\n"])
    chinese = {_squash(n) for line in listed.splitlines() for n in re.split(r"[,|]", line)}
    used = _fonts(pypdfium2.PdfDocument(zh)[0])
    assert {_squash(f.split("+")[-1]) for f in used} & chinese, (used, listed)


def test_a_chinese_pdf_without_a_chinese_font_is_refused_plainly(monkeypatch):
    from gpupool.billing import invoice_pdf as pdf_module
    from gpupool.model import SpecError

    monkeypatch.setattr(pdf_module, "has_cjk_font", lambda: False)
    try:
        pdf_module.invoice_pdf("<p>合计</p>", "zh")
    except SpecError as exc:
        assert exc.field == "lang" and "no Chinese font is installed" in str(exc)
    else:
        raise AssertionError("a Chinese PDF without a Chinese font was made")
    assert pdf_module.invoice_pdf("<p>Total</p>", "en").startswith(b"%PDF")


def test_drafts_are_computed_while_others_write(sqlite_server, monkeypatch):
    """Issue 47: `billing issue` took 55 s under load — it computed every invoice inside the
    write transaction, holding the database's write lock, so everything else that writes
    (submissions, heartbeats, the scheduler) queued behind it, and it behind them. Drafts are
    now computed from a read; a submission made while one is being computed goes through."""
    import httpx

    from gpupool.server import issuing

    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    month = time.strftime("%Y-%m", time.gmtime(time.time() + 8 * 3600))  # Asia/Shanghai
    usage_record(sqlite_server, "algo", month_bounds(month)[0] + 60, hours=1)
    meanwhile: list[object] = []
    real = issuing.month_invoice

    def computing(*args, **kwargs):
        if not meanwhile:  # a submission while the first invoice is being computed
            body = {"request": "gpu=1", "tenant": "algo", "command": ["true"]}
            headers = {"Authorization": f"Bearer {sqlite_server.admin_token}"}
            try:
                r = httpx.post(f"{sqlite_server.url}/api/v1/jobs", json=body, headers=headers,
                               timeout=5)  # fmt: skip
                meanwhile.append(r.status_code)
            except httpx.TimeoutException:
                meanwhile.append("blocked behind the invoicing")
        return real(*args, **kwargs)

    monkeypatch.setattr(issuing, "month_invoice", computing)
    drafts = ok(admin.post("/api/v1/billing/invoices/issue", json={"month": month}))
    assert meanwhile == [201]
    assert [d["tenant"] for d in drafts] == ["algo"]


def test_a_parent_team_lists_its_sub_teams(sqlite_server):
    """Issue 47: the invoice had no sub-teams. A department's invoice (and its month-end
    draft) lists what each team below it used and owes on its own invoice."""
    admin = sqlite_server.admin()
    for name, parent in (("research", None), ("vision", "research"), ("nlp", "research")):
        body = {"name": name, **({"parent": parent} if parent else {})}
        ok(admin.post("/api/v1/tenants", json=body), 201)
    month = time.strftime("%Y-%m", time.gmtime(time.time() + 8 * 3600))  # Asia/Shanghai
    start = month_bounds(month)[0]
    usage_record(sqlite_server, "vision", start + 60, hours=2)
    usage_record(sqlite_server, "nlp", start + 60, hours=1, pct=50)
    params = {"tenant": "research", "month": month}
    live = ok(admin.get("/api/v1/billing/invoice", params=params))
    teams = {t["tenant"]: t for t in live["sub_teams"]}
    assert teams["vision"]["card_hours"] == "2.0000" and teams["nlp"]["card_hours"] == "0.5000"
    vision = ok(admin.get("/api/v1/billing/invoice", params={**params, "tenant": "vision"}))
    assert teams["vision"]["total"] == vision["total"] and "sub_teams" not in vision
    drafts = ok(admin.post("/api/v1/billing/invoices/issue", json={"month": month}))
    assert sorted(d["tenant"] for d in drafts) == ["nlp", "research", "vision"]
    research = next(d for d in drafts if d["tenant"] == "research")
    page = admin.get(f"/api/v1/billing/invoices/{research['id']}", params={"format": "html"})
    assert "下级团队" in page.text and "<td>vision</td>" in page.text

"""The HTML reports in a real browser (Debian's chromium driven by Playwright): they open from
a file with the network off, request nothing else, log no errors, and draw every chart with
its lines and every table with its rows."""

import pytest

from tests.support.browser import needs_chromium
from tests.support.builders import OPENB_SMALL, openb_trace
from tests.support.cli import gpupool

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reports")
    two = "n1,32000,262144,1,G2\nn2,64000,262144,2,T4\n"
    nodes, pods = openb_trace(tmp, OPENB_SMALL, nodes=two)
    out = {}
    for name, args, charts in (
        ("fgd", ["fgd", "--policies", "paper-best-fit,fgd", "--seeds", "1-2"], 2),
        ("openb-time", ["openb-time", "--policies", "best-fit"], 3),
    ):
        path = tmp / f"{name}.html"
        cmd = ["simulate", *args, "--nodes", str(nodes), "--pods", str(pods)]
        run = gpupool(*cmd, "--json", "--report", str(path))
        assert run.returncode == 0, run.stderr
        out[name] = (path, charts)
    path = tmp / "scenario.html"
    run = gpupool("simulate", "scenario", "examples/seed-scenario.yaml", "--report", str(path))
    assert run.returncode == 0, run.stderr
    out["scenario"] = (path, None)
    return out


def _open_offline(browser, path):
    """Open a page file with the network off: it loads, logs no error and fetches nothing
    but itself (self-contained)."""
    context = browser.new_context(offline=True)
    page = context.new_page()
    problems: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri(), wait_until="load")
    assert problems == []
    assert requests == [path.as_uri()]
    return context, page


@pytest.mark.parametrize("name", ["fgd", "openb-time", "scenario"])
def test_report_renders_offline_without_errors(browser, reports, name):
    path, charts = reports[name]
    context, page = _open_offline(browser, path)
    assert page.title()
    svgs = page.locator("svg")
    count = svgs.count()
    assert count >= 1 and (charts is None or count == charts)
    for i in range(count):
        box = svgs.nth(i).bounding_box()
        assert box is not None and box["width"] >= 300 and box["height"] >= 150
        # every series is drawn inside its chart with a visible extent
        lines = page.evaluate(
            """(i) => [...document.querySelectorAll('svg')[i].querySelectorAll('polyline')]
                 .map(p => { const b = p.getBBox(); return [p.points.length, b.width]; })""",
            i,
        )
        assert lines and all(n >= 2 and width > 0 for n, width in lines), lines
    rows = page.locator("table tr")
    assert rows.count() >= 2  # a header and at least one row
    context.close()


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_printable_invoice_renders_offline(browser, tmp_path, lang):
    """The invoice page is self-contained, logs no error, and its table says what the JSON
    says: one row a line, the total in the footer."""
    from gpupool.billing.catalog import Catalog
    from gpupool.billing.invoice import Usage, invoice, month_bounds
    from gpupool.billing.invoice_html import invoice_html
    from gpupool.billing.plans import new_plan

    start, _ = month_bounds("2026-11")
    c = Catalog.default()
    plan = new_plan(c, 1, "algo", "A100-80G", 4, "monthly", 1, start)
    usage = [Usage("A100-80G", start, start + 720 * 3600, 600 * 720 * 3600, 0)]
    inv = invoice("algo", "2026-11", usage, c, plans=[plan])
    path = tmp_path / f"invoice-{lang}.html"
    path.write_text(invoice_html(inv, lang, start))
    context, page = _open_offline(browser, path)
    assert page.locator("tbody tr").count() == len(inv["lines"]) == 2
    assert page.locator("#total").inner_text() == "¥15,000.00" and inv["total"] == "15000.00"
    context.close()

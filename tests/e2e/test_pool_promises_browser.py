"""What the pool has promised, on the dashboard in a real browser (Debian's chromium through
Playwright) against a real server (issue 59), in English and Chinese: the Teams page shows
every level where guarantees exceed what is above them; the admin page's reservations say
what each one ahead will stop or move when it begins."""

import re
import time

from playwright.sync_api import expect

from gpupool.server.settings import Settings
from gpupool.server.web.i18n import messages
from tests.support.agents import wait_for
from tests.support.browser import needs_chromium
from tests.support.cluster import node_body, ok
from tests.support.live import live_server
from tests.support.paths import TESTS

AXE = TESTS / "support" / "vendor" / "axe.min.js"

VISIBLE_TEXT = """() => [...document.querySelectorAll('#gp-content *')]
  .filter((e) => e.children.length === 0 && e.getClientRects().length)
  .map((e) => e.textContent.trim()).filter(Boolean)"""


def _serious(page) -> list[str]:
    """What axe-core finds serious or critical on the page."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run(document)).violations")
    return [f"{v['id']}: {v['help']}" for v in found if v["impact"] in ("serious", "critical")]


def _no_english(page) -> list[str]:
    """Lines of the page that are English labels (a Chinese page must show none)."""
    en, zh = messages("en"), messages("zh")
    english = {v for k, v in en.items() if v != zh[k] and "{" not in v} - set(zh.values())
    templated = [
        re.compile(re.sub(r"\\?\{[a-z]+\\?\}", ".*", re.escape(v).replace(r"\{", "{")) + "$")
        for v in en.values()
        if "{" in v
    ]
    return [
        line
        for text in page.evaluate(VISIBLE_TEXT)
        for line in text.splitlines()
        if line in english
        or any(p.match(line) for p in templated)
        or re.fullmatch(r"[a-z_]+\.[a-z0-9_-]+", line)  # a message key without its text
    ]


pytestmark = needs_chromium


def _page(browser, srv, lang: str, **options):
    locale = "zh-CN" if lang == "zh" else "en-US"
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale=locale, **options)
    context.add_cookies([{"name": "gpupool_lang", "value": lang, "url": srv.url}])
    page = context.new_page()
    page.problems = []
    page.on("pageerror", lambda e: page.problems.append(str(e)))
    page.goto(srv.url + "/login")
    page.fill("#gp-token", srv.admin_token)
    page.click("#gp-login button[type=submit]")
    page.wait_for_url(srv.url + "/")
    return context, page


def test_the_teams_page_shows_guarantees_overbooked_at_every_level(browser, tmp_path):
    with live_server(Settings(data_dir=tmp_path, log_json=False)) as srv:
        admin = srv.admin()
        for i in range(10):  # the seed: 40 cards, three teams under a company without quota
            ok(admin.post("/api/v1/nodes", json=node_body(f"node-{i + 1:02d}", cards=4)))
        ok(admin.post("/api/v1/tenants", json={"name": "company"}), 201)
        for team, cards in (("algorithm", 48), ("inference", 10), ("devtest", 10)):
            ok(admin.post("/api/v1/tenants", json={"name": team, "parent": "company"}), 201)
            ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu",
                         json={"resource": "gpu", "nominal": cards}))  # fmt: skip
        # and a project overbooking its team's guarantee, one level down
        ok(admin.post("/api/v1/tenants", json={"name": "vision", "parent": "devtest"}), 201)
        ok(admin.put("/api/v1/tenants/vision/quotas/gpu", json={"resource": "gpu",
                                                                 "nominal": 12}))  # fmt: skip
        context, page = _page(browser, srv, "en")
        page.goto(srv.url + "/teams")
        box = page.locator("#gp-overbooked")
        expect(box.locator("li")).to_have_count(2)
        assert box.locator("li").all_inner_texts() == [
            "gpu: guarantees algorithm 48 cards + devtest 10 cards + inference 10 cards = "
            "68 cards exceed the pool's 40 cards",
            "gpu: guarantees vision 12 cards = 12 cards exceed devtest's guarantee of 10 cards",
        ]
        assert page.problems == []
        context.close()
        context, page = _page(browser, srv, "en", bypass_csp=True)  # axe is a script
        page.goto(srv.url + "/teams")
        expect(page.locator("#gp-overbooked li")).to_have_count(2)
        assert _serious(page) == []
        context.close()
        context, page = _page(browser, srv, "zh")
        page.goto(srv.url + "/teams")
        box = page.locator("#gp-overbooked")
        expect(box.locator("li")).to_have_count(2)
        assert box.locator("h3").inner_text() == "保证额度超额承诺"
        assert box.locator("li").first.inner_text() == (
            "gpu:保证额度 algorithm 48 张卡 + devtest 10 张卡 + inference 10 张卡 = 68 张卡,"
            "超过资源池的 40 张卡"
        )
        assert _no_english(page) == []
        context.close()
        # put right, the warning goes
        ok(admin.put("/api/v1/tenants/algorithm/quotas/gpu",
                     json={"resource": "gpu", "nominal": 20}))  # fmt: skip
        ok(admin.put("/api/v1/tenants/vision/quotas/gpu", json={"resource": "gpu",
                                                                 "nominal": 10}))  # fmt: skip
        context, page = _page(browser, srv, "en")
        page.goto(srv.url + "/teams")
        page.wait_for_selector("#gp-live:not(:empty)")
        expect(page.locator("table tbody tr").first).to_be_visible()
        assert page.locator("#gp-overbooked li").count() == 0
        context.close()


def test_the_admin_page_shows_what_a_reservation_will_stop_or_move(browser, tmp_path):
    """Issue 59: what a reservation would stop was said only once it existed, and nowhere
    on the dashboard. The reservations list now says, for each one ahead, the replicas it
    moves (a copy elsewhere first) and where, the jobs it stops and the services it leaves
    without a place."""
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2,
                        service_interval_s=0.3)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "company"}), 201)
        for team in ("algorithm", "inference"):
            ok(admin.post("/api/v1/tenants", json={"name": team, "parent": "company"}), 201)
            ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu",
                         json={"resource": "gpu", "nominal": 2}))  # fmt: skip
        for name in ("n1", "n2", "n3"):
            ok(admin.post("/api/v1/nodes", json=node_body(name, cards=2)))
        now = time.time()
        ok(admin.post("/api/v1/reservations", json={
            "tenant": "algorithm", "nodes": ["n1"], "start": now + 3600, "end": now + 86400,
        }), 201)  # fmt: skip
        service = {"name": "chat", "tenant": "inference", "request": "gpu=1", "target": 5,
                   "min_replicas": 2, "max_replicas": 2, "command": ["sleep", "600"]}  # fmt: skip
        ok(admin.post("/api/v1/services", json=service), 201)
        wait_for("two replicas placed", lambda: sorted(
            r["node"] or "" for r in ok(admin.get("/api/v1/services/chat"))["replicas"]
        ) == ["n2", "n3"], timeout=30)  # fmt: skip
        ids = sorted(r["job_id"] for r in ok(admin.get("/api/v1/services/chat"))["replicas"])
        made = ok(admin.post("/api/v1/reservations", json={
            "tenant": "algorithm", "nodes": ["n2", "n3"], "start": time.time() + 300,
            "end": time.time() + 7200, "allow_outage": True,
        }), 201)  # fmt: skip
        for lang, moves, strands in (
            ("en", "moves job {a} (chat) → n1; job {b} (chat) → n1 (a copy first)",
             "leaves job {a} (chat), job {b} (chat) without a place"),
            ("zh", "迁移 作业 {a} (chat) → n1; 作业 {b} (chat) → n1(先启动副本)",
             "作业 {a} (chat), 作业 {b} (chat) 将无处运行"),
        ):  # fmt: skip
            context, page = _page(browser, srv, lang)
            page.goto(srv.url + "/admin")
            row = page.locator("tr", has=page.locator("td[data-col=id]", has_text=str(made["id"])))
            expect(row.locator("[data-plan=moves]")).to_have_text(moves.format(a=ids[0], b=ids[1]))
            strand = row.locator("[data-plan=stranded]")
            expect(strand).to_have_text(strands.format(a=ids[0], b=ids[1]))
            assert page.problems == []
            # the check finds English where there is (the control), none in Chinese
            assert (_no_english(page) == []) is (lang == "zh")
            context.close()
        context, page = _page(browser, srv, "en", bypass_csp=True)  # axe is a script
        page.goto(srv.url + "/admin")
        expect(page.locator("[data-plan=stranded]").first).to_be_visible()
        assert _serious(page) == []
        context.close()
        ok(admin.delete("/api/v1/services/chat"), 204)

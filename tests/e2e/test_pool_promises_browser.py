"""What the pool has promised, on the dashboard in a real browser (Debian's chromium through
Playwright) against a real server (issue 59): the Teams page shows every level where
guarantees exceed what is above them, in English and Chinese."""

from playwright.sync_api import expect

from gpupool.server.settings import Settings
from tests.support.browser import needs_chromium
from tests.support.cluster import node_body, ok
from tests.support.live import live_server

pytestmark = needs_chromium


def _page(browser, srv, lang: str):
    context = browser.new_context(viewport={"width": 1280, "height": 800},
                                  locale="zh-CN" if lang == "zh" else "en-US")  # fmt: skip
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
        context, page = _page(browser, srv, "zh")
        page.goto(srv.url + "/teams")
        box = page.locator("#gp-overbooked")
        expect(box.locator("li")).to_have_count(2)
        assert box.locator("h3").inner_text() == "保证额度超额承诺"
        assert box.locator("li").first.inner_text() == (
            "gpu:保证额度 algorithm 48 张卡 + devtest 10 张卡 + inference 10 张卡 = 68 张卡,"
            "超过资源池的 40 张卡"
        )
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

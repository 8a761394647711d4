"""Screenshots of the dashboard's main pages in both languages (docs/screenshots/).

Run against a live server, e.g. ``gpupool up --demo`` after a minute or two::

    python scripts/dashboard_screenshots.py http://127.0.0.1:8080 gpupool-data/admin-token \
        docs/screenshots

Needs Playwright and Debian's chromium (``apt-get install chromium``); CJK fonts
(``fonts-wqy-microhei`` or ``fonts-noto-cjk``) for the Chinese pages.
"""

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's tests/
from tests.support.browser import CHROMIUM, FLAGS  # the browser tests' own flags

PAGES = [
    ("overview", "/"),
    ("nodes", "/nodes"),
    ("jobs", "/jobs"),
    ("job", "/jobs/1"),
    ("services", "/services"),
    ("teams", "/teams"),
    ("billing", "/billing"),
    ("admin", "/admin"),
]


def main(base: str, token_file: str, out: str) -> None:
    token = Path(token_file).read_text().strip()
    Path(out).mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for lang in ("en", "zh"):
            locale = "zh-CN" if lang == "zh" else "en-US"  # the browser's own widgets follow it
            context = browser.new_context(viewport={"width": 1280, "height": 800}, locale=locale)
            context.add_cookies([{"name": "gpupool_lang", "value": lang, "url": base}])
            page = context.new_page()
            page.goto(base + "/login")
            page.fill("#gp-token", token)
            page.click("#gp-login button[type=submit]")
            page.wait_for_url(base + "/")
            for name, path in PAGES:
                page.goto(base + path)
                page.wait_for_selector("#gp-live:not(:empty)")
                page.wait_for_timeout(800)
                page.screenshot(path=f"{out}/{name}-{lang}.png")
            context.close()
        browser.close()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])

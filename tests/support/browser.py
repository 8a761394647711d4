"""Debian's chromium through Playwright for the browser tests (and the screenshot script):
the launch flags for a closed network, a skip where chromium is missing (an error where
``GPUPOOL_REQUIRE_BROWSER`` says it must be there, as in CI), and a module-wide browser."""

import os
import shutil
from collections.abc import Iterator

import pytest

CHROMIUM = shutil.which("chromium")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

if CHROMIUM is None and os.environ.get("GPUPOOL_REQUIRE_BROWSER"):
    raise RuntimeError("chromium is required here (GPUPOOL_REQUIRE_BROWSER) but not installed")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (apt-get install chromium; CI installs it)"
)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """One browser for a test module (registered in conftest.py)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()

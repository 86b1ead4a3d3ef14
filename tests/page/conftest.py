"""The web page in headless Chromium (Playwright driving Debian's `chromium`), against a real
jin on a port and the fake model server. Screenshots go to tests/page/screenshots/ (ignored)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

from tests.api.conftest import jin_factory  # noqa: F401  (the running app, for these tests too)

SHOTS = Path(__file__).parent / "screenshots"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
INSTALL = "apt-get install -y chromium   (as root; or set JIN_CHROMIUM to a Chromium binary)"


def chromium_path() -> str | None:
    """JIN_CHROMIUM, else Debian's chromium on the PATH."""
    given = os.environ.get("JIN_CHROMIUM")
    if given:
        return given
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    path = chromium_path()
    if path is None:
        pytest.fail(f"no Chromium for the page's tests; install one: {INSTALL}")
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield chromium
        await chromium.close()


@pytest.fixture
def jin(jin_factory: Callable[..., str]) -> str:  # noqa: F811
    return jin_factory()


@pytest.fixture
async def page(browser: Browser, jin: str, request: pytest.FixtureRequest) -> AsyncIterator[Page]:
    """The page of a fresh browser context, its user id already chosen; a screenshot at the
    end. Errors the page's scripts throw fail the test."""
    context = await browser.new_context(base_url=jin, viewport={"width": 1280, "height": 800})
    await context.add_init_script("localStorage.setItem('jin.user', 'u1')")
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # (A 401 the page answers by asking for a key is the browser's console line, not an error.)
    page.on("console", lambda m: errors.append(m.text)
            if m.type == "error" and "status of 401" not in m.text else None)
    yield page
    SHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{request.node.name}.png"))
    await context.close()
    assert not errors, f"the page reported errors: {errors}"


async def open_page(page: Page) -> None:
    await page.goto("/")
    await page.locator("body[data-ready]").wait_for(state="attached")

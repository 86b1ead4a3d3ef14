"""The memory panel's L1 section in a real browser: the state each turn's helper writes, its
highlighted diff that fades, prev/next through the versions, and deleting a line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from playwright.async_api import Locator, Page, expect

from llm.testing import FakeOpenAIServer, Reply
from tests.page.conftest import SHOTS, open_page


@pytest.fixture
def jin(jin_factory: Callable[..., str]) -> str:
    # L2 on, as deployed (its section shares the panel); it distils after five L1 versions,
    # which these tests never reach.
    return jin_factory(runtime_memory=True, l1_wait_s=10.0, l2_enabled=True)


async def say(page: Page, model: FakeOpenAIServer, helper: FakeOpenAIServer, text: str,
              answer: str, state: str) -> None:
    """One turn through the page: the model answers, the helper rewrites the state."""
    model.push(Reply([answer]))
    helper.push(Reply([state]))
    await page.locator("#input").fill(text)
    await page.locator("#input").press("Enter")
    await expect(page.locator(".msg.assistant .content").last).to_have_text(answer)
    await expect(page.locator("#send")).to_have_text("send")


async def memory_panel(page: Page) -> Locator:
    """The page opened, with its memory panel (Alt+M): the L1 section."""
    await open_page(page)
    await page.keyboard.press("Alt+m")
    return page.locator("#runtime-memory")


def line(panel: Locator, key: str) -> Locator:
    return panel.locator(f".l1-line[data-key='{key}']")


# The panel's lines as the page first draws `version`, and when their highlights went: taken in
# the page as it happens, so a slow test run cannot miss a highlight that lasts 1.5 s.
_WATCH = """version => {
  const panel = document.querySelector('#runtime-memory');
  const seen = window.l1Seen = {lines: null, drawnAt: null, fadedAt: null};
  new MutationObserver(() => {
    const shown = panel.querySelector('.l1-version')?.textContent === version;
    if (shown && seen.lines === null) {
      seen.drawnAt = performance.now();
      seen.lines = Object.fromEntries([...panel.querySelectorAll('.l1-line')].map(n => [
        n.dataset.key, {line: n.className, key: n.querySelector('.l1-key').className,
                        value: n.querySelector('.l1-value').className,
                        fading: getComputedStyle(n).animationName}]));
    } else if (seen.lines !== null && seen.fadedAt === null
               && !panel.querySelector('.hl-new, .hl-changed')) {
      seen.fadedAt = performance.now();
    }
  }).observe(panel, {subtree: true, childList: true, attributes: true,
                     attributeFilter: ['class']});
}"""


async def drawn(page: Page, version: str) -> dict[str, Any]:
    """What `_WATCH` saw of `version`, once its highlights have gone."""
    await page.wait_for_function("() => window.l1Seen && window.l1Seen.fadedAt !== null",
                                 timeout=15_000)
    seen: dict[str, Any] = await page.evaluate("() => window.l1Seen")
    return seen


async def test_the_panel_shows_each_update_highlighted_replays_versions_and_deletes_a_line(
    page: Page, model: FakeOpenAIServer, helper: FakeOpenAIServer, jin: str
) -> None:
    panel = await memory_panel(page)
    await expect(panel).to_contain_text("No chat open.")

    await page.evaluate(_WATCH, "v1 of 1")
    await say(page, model, helper, "I'm in Rome for the weekend", "Enjoy Rome!",
              "!user_city: Rome\ntrip: weekend")
    await expect(panel.locator(".l1-line")).to_have_count(2)
    await expect(panel.locator(".l1-version")).to_have_text("v1 of 1")
    city = line(panel, "user_city")
    await expect(city.locator(".l1-value")).to_have_text("Rome")
    await expect(city.locator(".durable")).to_have_text("!")
    await expect(city.locator(".strength")).to_have_text("0.50")
    await expect(line(panel, "trip").locator(".durable")).to_have_count(0)
    await expect(city.get_by_role("button", name="durable")).to_have_attribute(
        "aria-pressed", "true")
    # Both keys were new: drawn highlighted, and the highlight faded.
    first = await drawn(page, "v1 of 1")
    assert {k: v["line"] for k, v in first["lines"].items()} == {
        "user_city": "l1-line hl-new", "trip": "l1-line hl-new"}
    await expect(panel.locator(".hl-new, .hl-changed")).to_have_count(0)

    # The second turn changes a value and adds a key.
    await page.evaluate(_WATCH, "v2 of 2")
    await say(page, model, helper, "Actually Milan, and money is tight", "Milan it is.",
              "!user_city: Milan\ntrip: weekend\nbudget: tight")
    await expect(panel.locator(".l1-version")).to_have_text("v2 of 2")
    await page.screenshot(path=str(SHOTS.joinpath("l1-highlighted-diff.png")))
    second = await drawn(page, "v2 of 2")
    lines = second["lines"]
    assert lines["budget"]["line"] == "l1-line hl-new"
    assert lines["user_city"]["line"] == "l1-line hl-changed"
    assert lines["user_city"]["value"] == "l1-value hl-changed"
    assert lines["user_city"]["key"] == "l1-key"  # the key stayed
    assert lines["trip"]["line"] == "l1-line"  # unchanged: no highlight
    assert lines["budget"]["fading"] == "l1-fade"
    shown = (second["fadedAt"] - second["drawnAt"]) / 1000
    assert 1.4 < shown < 6, f"the highlight lasted {shown:.2f} s"  # about 1.5 s
    await expect(city.locator(".l1-value")).to_have_text("Milan")
    budget = line(panel, "budget")

    # prev replays version 1 (history: no delete buttons), next comes back.
    await panel.locator(".l1-prev").click()
    await expect(panel.locator(".l1-version")).to_have_text("v1 of 2")
    await expect(city.locator(".l1-value")).to_have_text("Rome")
    await expect(budget).to_have_count(0)
    await expect(panel.get_by_role("button", name="delete")).to_have_count(0)
    await expect(panel.locator(".l1-prev")).to_be_disabled()
    await panel.locator(".l1-next").click()
    await expect(panel.locator(".l1-version")).to_have_text("v2 of 2")
    await expect(city.locator(".l1-value")).to_have_text("Milan")

    # Delete a line: a new version without it, and it stays gone after a reload.
    await line(panel, "trip").get_by_role("button", name="delete").click()
    await expect(panel.locator(".l1-version")).to_have_text("v3 of 3")
    await expect(line(panel, "trip")).to_have_count(0)
    await expect(panel.locator(".l1-removed")).to_contain_text("trip: weekend")
    await page.reload()
    await page.locator("body[data-ready]").wait_for(state="attached")
    await page.keyboard.press("Alt+m")
    await expect(panel.locator(".l1-version")).to_have_text("v3 of 3")
    await expect(panel.locator(".l1-line")).to_have_count(2)
    await expect(line(panel, "trip")).to_have_count(0)
    await expect(panel.locator(".l1-deleted")).to_have_text("deleted by you: trip")
    async with httpx.AsyncClient(base_url=jin) as client:
        chat = (await client.get("/v1/chats", params={"user_id": "u1"})).json()["chats"][0]
        state = (await client.get(f"/v1/chats/{chat['id']}/runtime-memory")).json()
    assert [x["key"] for x in state["lines"]] == ["user_city", "budget"]


async def test_forget_all_empties_the_state(
    page: Page, model: FakeOpenAIServer, helper: FakeOpenAIServer, jin: str
) -> None:
    panel = await memory_panel(page)
    await say(page, model, helper, "I like tea", "Tea is good.", "drink: tea")
    await expect(panel.locator(".l1-line")).to_have_count(1)
    await panel.get_by_role("button", name="forget all").click()
    await expect(panel.locator(".l1-version")).to_have_text("v2 of 2")
    await expect(panel.locator(".l1-line")).to_have_count(0)
    await expect(panel).to_contain_text("(empty)")
    await expect(panel.locator(".l1-deleted")).to_have_text("deleted by you: drink")


async def test_a_line_is_made_durable_from_the_panel(
    page: Page, model: FakeOpenAIServer, helper: FakeOpenAIServer, jin: str
) -> None:
    panel = await memory_panel(page)
    await say(page, model, helper, "I like tea", "Tea is good.", "drink: tea")
    toggle = line(panel, "drink").get_by_role("button", name="durable")
    await expect(toggle).to_have_attribute("aria-pressed", "false")
    await toggle.click()
    await expect(panel.locator(".l1-version")).to_have_text("v2 of 2")
    await expect(panel.locator(".l1-nav")).to_contain_text("durable")
    await expect(toggle).to_have_attribute("aria-pressed", "true")
    await expect(line(panel, "drink").locator(".durable")).to_have_text("!")

"""The memory panel's L1 section in a real browser: the state each turn's helper writes, its
highlighted diff that fades, prev/next through the versions, and deleting a line."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest
from playwright.async_api import Locator, Page, expect

from llm.testing import FakeOpenAIServer, Reply
from tests.page.conftest import SHOTS, open_page


@pytest.fixture
def jin(jin_factory: Callable[..., str]) -> str:
    return jin_factory(runtime_memory=True, l1_wait_s=10.0)


async def say(page: Page, model: FakeOpenAIServer, helper: FakeOpenAIServer, text: str,
              answer: str, state: str) -> None:
    """One turn through the page: the model answers, the helper rewrites the state."""
    model.push(Reply([answer]))
    helper.push(Reply([state]))
    await page.locator("#input").fill(text)
    await page.locator("#input").press("Enter")
    await expect(page.locator(".msg.assistant .content").last).to_have_text(answer)
    await expect(page.locator("#send")).to_have_text("send")


def line(panel: Locator, key: str) -> Locator:
    return panel.locator(f".l1-line[data-key='{key}']")


async def test_the_panel_shows_each_update_highlighted_replays_versions_and_deletes_a_line(
    page: Page, model: FakeOpenAIServer, helper: FakeOpenAIServer, jin: str
) -> None:
    await open_page(page)
    await page.keyboard.press("Alt+m")
    panel = page.locator("#runtime-memory")
    await expect(panel).to_contain_text("No chat open.")

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
    # Both keys are new: highlighted, until the highlight fades.
    await expect(panel.locator(".l1-line.hl-new")).to_have_count(2)
    await expect(panel.locator(".hl-new")).to_have_count(0, timeout=4000)

    # The second turn changes a value and adds a key.
    await say(page, model, helper, "Actually Milan, and money is tight", "Milan it is.",
              "!user_city: Milan\ntrip: weekend\nbudget: tight")
    await expect(panel.locator(".l1-version")).to_have_text("v2 of 2")
    budget = line(panel, "budget")
    await expect(budget).to_have_class("l1-line hl-new")
    seen = time.monotonic()
    await expect(city).to_have_class("l1-line hl-changed")
    await expect(city.locator(".l1-value")).to_have_class("l1-value hl-changed")
    await expect(city.locator(".l1-value")).to_have_text("Milan")
    await expect(city.locator(".l1-key")).to_have_class("l1-key")  # the key stayed
    await expect(line(panel, "trip")).to_have_class("l1-line")  # unchanged: no highlight
    fading = await budget.evaluate("n => getComputedStyle(n).animationName")
    assert fading == "l1-fade"
    await page.screenshot(path=str(SHOTS.joinpath("l1-highlighted-diff.png")))
    await expect(panel.locator(".hl-new, .hl-changed")).to_have_count(0, timeout=4000)
    shown = time.monotonic() - seen
    assert 0.8 < shown < 4, f"the highlight lasted {shown:.2f} s"

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
    await open_page(page)
    await page.keyboard.press("Alt+m")
    panel = page.locator("#runtime-memory")
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
    await open_page(page)
    await page.keyboard.press("Alt+m")
    panel = page.locator("#runtime-memory")
    await say(page, model, helper, "I like tea", "Tea is good.", "drink: tea")
    toggle = line(panel, "drink").get_by_role("button", name="durable")
    await expect(toggle).to_have_attribute("aria-pressed", "false")
    await toggle.click()
    await expect(panel.locator(".l1-version")).to_have_text("v2 of 2")
    await expect(panel.locator(".l1-nav")).to_contain_text("durable")
    await expect(toggle).to_have_attribute("aria-pressed", "true")
    await expect(line(panel, "drink").locator(".durable")).to_have_text("!")

"""The memory panel's L3 section in a real browser: save the session, see it listed with its
digest (as text, never markup), start a new chat from it, and that chat's first prompt reads
the digest and its L1 starts from the snapshot's."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.async_api import Page, expect

from llm.testing import FakeOpenAIServer, Reply
from tests.page.conftest import SHOTS
from tests.page.test_runtime_memory_panel import line, memory_panel, say

DIGEST = "Ann plans <b>Rome</b> in May <img src=x onerror=\"window.pwned=1\"> on a tight budget."


@pytest.fixture
def jin(jin_factory: Callable[..., str]) -> str:
    # As deployed: L2 comes with L1 (its panel section asks for the patterns).
    return jin_factory(runtime_memory=True, l1_wait_s=10.0, l2_enabled=True)


async def test_a_new_chat_starts_from_a_snapshot_saved_in_the_panel(
    page: Page, model: FakeOpenAIServer, helper: FakeOpenAIServer, jin: str
) -> None:
    panel = await memory_panel(page)
    snapshots = page.locator("#snapshots")
    await say(page, model, helper, "Rome in May, budget tight", "Noted!",
              "!user_name: Ann\ntrip: Rome in May\nbudget: tight")
    await expect(panel.locator(".l1-line")).to_have_count(3)
    await expect(snapshots).to_contain_text("No snapshots yet.")

    helper.push(Reply([DIGEST]))
    await snapshots.get_by_role("button", name="save session").click()
    item = snapshots.locator(".snapshot")
    await expect(item).to_have_count(1)
    await expect(item.locator(".snapshot-title strong")).to_have_text(
        "Rome in May, budget tight")  # the chat's title, named after its first message
    await expect(item).to_contain_text("3 lines")
    await item.locator("summary").click()
    await expect(item.locator(".snapshot-digest")).to_have_text(DIGEST)  # as text
    assert await item.locator(".snapshot-digest img, .snapshot-digest b").count() == 0
    await page.screenshot(path=str(SHOTS.joinpath("l3-snapshot-listed.png")))

    await item.get_by_role("button", name="new chat from here").click()
    await expect(page.locator("#chat-list .chat")).to_have_count(2)
    await expect(page.locator("#chat-title")).to_have_text("Rome in May, budget tight")
    await expect(page.locator("#chat-list .chat.selected")).to_have_count(1)
    first_chat = await page.locator("#chat-list .chat").nth(1).get_attribute("data-id")
    new_chat = await page.locator("#chat-list .chat.selected").get_attribute("data-id")
    assert new_chat != first_chat
    # Its L1 is the snapshot's, as its first version.
    await expect(panel.locator(".l1-version")).to_have_text("v1 of 1")
    await expect(line(panel, "trip").locator(".l1-value")).to_have_text("Rome in May")

    await say(page, model, helper, "Which hotel then?", "Try Trastevere.",
              "!user_name: Ann\ntrip: Rome in May\nhotel: Trastevere")
    fence = next(m["content"] for m in model.requests[-1]["messages"]
                 if m["content"].startswith("<session-snapshot>"))
    assert "Ann plans <b>Rome</b> in May" in fence
    # A new chat: none of the first chat's messages, only what the snapshot carried.
    assert [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"] == [
        "Which hotel then?"]
    await expect(panel.locator(".l1-version")).to_have_text("v2 of 2")
    assert await page.evaluate("() => window.pwned === undefined")

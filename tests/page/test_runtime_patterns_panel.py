"""The memory panel's L2 section in a real browser: the patterns the helper distils appear with
their type, confidence, span and the user's own words, and an L1 update that changed nothing
shows as an alert."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.async_api import Page, expect

from llm.testing import FakeOpenAIServer, Reply
from tests.page.conftest import SHOTS
from tests.page.test_runtime_memory_panel import memory_panel


@pytest.fixture
def jin(jin_factory: Callable[..., str]) -> str:
    # L2 distils after every second turn here (JIN's rule waits for five L1 versions).
    return jin_factory(runtime_memory=True, l1_wait_s=10.0, l2_enabled=True, l2_wait_s=10.0,
                       l2_min_turns=2, l2_min_l1_versions=2, l2_min_key_repeats=2)


async def say(page: Page, model: FakeOpenAIServer, helper: FakeOpenAIServer, text: str,
              state: str, patterns: str | None = None) -> None:
    model.push(Reply(["OK."]))
    helper.push(Reply([state]))
    if patterns is not None:
        helper.push(Reply([patterns]))
    answers = page.locator(".msg.assistant .content")
    before = await answers.count()
    await page.locator("#input").fill(text)
    await page.locator("#input").press("Enter")
    # (The send button reads "send" before the step starts too: wait for this step's answer.)
    await expect(answers).to_have_count(before + 1)
    await expect(answers.last).to_have_text("OK.")
    await expect(page.locator("#send")).to_have_text("send")


async def test_l2_patterns_appear_in_the_memory_panel(
    page: Page, model: FakeOpenAIServer, helper: FakeOpenAIServer, jin: str
) -> None:
    await memory_panel(page)
    section = page.locator("#runtime-patterns")
    await expect(section).to_contain_text("No chat open.")

    await say(page, model, helper, "I need a flight to Rome", "topic: flights to Rome")
    await expect(section).to_contain_text("No patterns yet")
    await say(page, model, helper, "Again: is there a flight to Rome?", "topic: flights to Rome",
              'repetition | high | asks for a flight to Rome again | "flight to Rome"; '
              '"words never said"')
    pattern = section.locator(".l2-pattern")
    await expect(pattern).to_have_count(1)
    await expect(pattern).to_have_attribute("data-type", "repetition")
    await expect(pattern.locator(".l2-type")).to_have_text("repetition")
    await expect(pattern.locator(".l2-confidence")).to_have_text("high")
    await expect(pattern.locator(".l2-seen")).to_have_text("2× v1–v2")
    await expect(pattern.locator(".l2-description")).to_have_text(
        "asks for a flight to Rome again")
    await expect(pattern.locator(".l2-evidence q")).to_have_text(["flight to Rome"])
    await expect(section.locator(".l2-version")).to_have_text("v1 of 1, from L1 v2")
    # The second L1 version changed nothing although the user wrote: an alert.
    await expect(section.locator(".l2-alert")).to_have_text(
        ["L1 v2 changed nothing although you wrote"])
    await page.screenshot(path=str(SHOTS.joinpath("l2-patterns.png")))

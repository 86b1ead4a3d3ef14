"""JIN_TRANSLATE_ANSWER on the page: the brain writes in English, the user reads its
translation; the brain's own words are there to see, apart and folded, live and after a
reload."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.async_api import Page, expect

from llm.testing import FakeOpenAIServer, Reply
from tests.page.conftest import open_page

QUESTION = "Какая столица Франции?"


@pytest.fixture
def jin(jin_factory: Callable[..., str], translator_url: str) -> str:
    return jin_factory(translator_url=translator_url, translator_model="fake-translator",
                       translate_answer=True)


async def test_a_translated_answer_shows_the_brains_words_apart_and_folded(
    page: Page, model: FakeOpenAIServer, translator: FakeOpenAIServer,
) -> None:
    translator.push(Reply(["What is the capital of France?"]), Reply(["Париж."]))
    model.push(Reply(["Par", "is."], chunk_delay=0.2))
    await open_page(page)
    await page.locator("#input").fill(QUESTION)
    await page.locator("#input").press("Enter")
    answer = page.locator(".msg.assistant").last
    await expect(answer.locator(".content")).to_have_text("Париж.")
    brain = answer.locator("details.brain")
    await expect(brain.locator(".brain-text")).to_have_text("Paris.")
    await expect(brain).not_to_have_attribute("open", "")
    await expect(answer.locator("details.reasoning:not(.brain)")).to_have_count(0)
    await page.reload()
    stored = page.locator(".msg.assistant").last
    await expect(stored.locator(".content")).to_have_text("Париж.")
    await expect(stored.locator("details.brain .brain-text")).to_have_text("Paris.")

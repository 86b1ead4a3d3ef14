"""The page's status line (each model role, whether it answers), the step's time and tokens per
node under its answer, and the translator's text in the context inspector, against a jin with a
translator and a helper whose server is down."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from playwright.async_api import Page, expect

from llm.testing import FakeOpenAIServer, Reply
from tests.page.conftest import open_page

QUESTION = "Какая столица Франции?"
TRANSLATED = "What is the capital of France?"
SYSTEM = "You are terse and exact."
DOWN = "http://127.0.0.1:9/v1"  # nothing listens on the discard port


@pytest.fixture
def jin(jin_factory: Callable[..., str], translator_url: str) -> str:
    """jin with a translator, and a helper no server answers for (short chats never call it)."""
    return jin_factory(translator_url=translator_url, translator_model="fake-translator",
                       helper_url=DOWN)


async def _translated_step(page: Page, jin: str, model: FakeOpenAIServer,
                           translator: FakeOpenAIServer) -> None:
    """One step in a chat with a system prompt, its Russian question read by the brain in
    English."""
    async with httpx.AsyncClient(base_url=jin) as client:
        made = await client.post("/v1/chats", json={"user_id": "u1", "title": "geography",
                                                    "system_prompt": SYSTEM})
        assert made.status_code == 201, made.text
    translator.push(Reply([TRANSLATED], usage={"prompt_tokens": 40, "completion_tokens": 9}))
    model.push(Reply(["Paris."], usage={"prompt_tokens": 30, "completion_tokens": 2}))
    await open_page(page)
    await page.locator("#input").fill(QUESTION)
    await page.locator("#input").press("Enter")
    await expect(page.locator(".msg.assistant .content")).to_have_text("Paris.")
    await expect(page.locator("#send")).to_have_text("send")


async def test_the_status_line_shows_each_role_its_model_and_whether_it_answers(
    page: Page, jin: str
) -> None:
    async with httpx.AsyncClient(base_url=jin) as client:
        roles = (await client.get("/v1/status")).json()["roles"]
    await open_page(page)
    shown = page.locator("#models .role")
    await expect(shown).to_have_count(len(roles))
    for name, role in roles.items():
        item = page.locator(f"#models .role[data-role='{name}']")
        await expect(item).to_contain_text(f"{name}: {role['model']}")
        await expect(item).to_have_class(
            "role up" if role["answers"] else "role down")
    await expect(page.locator("#models .role[data-role='helper']")).to_have_class("role down")
    await expect(page.locator("#models .role[data-role='translator']")).to_contain_text(
        "translator: fake-translator")
    await expect(page.locator("#models .role[data-role='brain'] .dot")).to_have_attribute(
        "aria-label", "answers")


async def test_each_answer_carries_its_steps_time_and_tokens_per_node(
    page: Page, jin: str, model: FakeOpenAIServer, translator: FakeOpenAIServer
) -> None:
    await _translated_step(page, jin, model, translator)
    answer = page.locator(".msg.assistant").last
    timings = answer.locator("details.telemetry")
    await expect(timings.locator("summary")).to_contain_text("translator")
    await timings.locator("summary").click()
    nodes = timings.locator("tbody tr")
    names = [await n.get_attribute("data-node") for n in await nodes.all()]
    # The route's nodes in order, then what else took time (the embedder, recall), then the
    # server's own overhead and the whole step.
    assert names[:4] == ["planner", "translator", "brain", "validator"], names
    assert names[-2:] == ["overhead", "total"], names
    translator_row = timings.locator("tr[data-node='translator']")
    await expect(translator_row.locator(".in")).to_have_text("40")
    await expect(translator_row.locator(".out")).to_have_text("9")
    brain_row = timings.locator("tr[data-node='brain']")
    await expect(brain_row.locator(".in")).to_have_text("30")
    await expect(brain_row.locator(".out")).to_have_text("2")
    for name in names:
        ms = await timings.locator(f"tr[data-node='{name}'] .ms").inner_text()
        assert ms.endswith(" ms") or ms.endswith(" s"), (name, ms)
    # The step in the status line too, with the nodes on hover.
    last = page.locator("#last-step")
    await expect(last).to_contain_text("last step: 70 in, 11 out")
    assert "translator: " in (await last.get_attribute("title") or "")
    # How full the context is, beside it.
    await expect(page.locator("#fullness")).to_contain_text("context ")


async def test_the_inspector_shows_the_translators_text_and_the_system_prompt(
    page: Page, model: FakeOpenAIServer, translator: FakeOpenAIServer, jin: str
) -> None:
    await _translated_step(page, jin, model, translator)
    await page.keyboard.press("Alt+i")
    view = page.locator("#context-view")
    section = view.locator("section.translation")
    await expect(section.locator(".route")).to_have_text(
        "route: planner → translator → brain → validator")
    text = section.locator("details.translator-text")
    await expect(text.locator("pre.translated")).to_be_hidden()
    await text.locator("summary").click()
    await expect(text.locator("pre.original")).to_have_text(QUESTION)
    await expect(text.locator("pre.translated")).to_have_text(TRANSLATED)
    await expect(section).to_contain_text("40 in, 9 out")

    # The chat's system prompt snapshot, as the model is sent it.
    async with httpx.AsyncClient(base_url=jin) as client:
        chat = (await client.get("/v1/chats", params={"user_id": "u1"})).json()["chats"][0]
        context = (await client.get(f"/v1/chats/{chat['id']}/context")).json()
    first = context["messages"][0]
    assert first["role"] == "system" and SYSTEM in first["content"], first
    system = view.locator(".section[data-name='system']")
    await system.get_by_role("button", name="text").click()
    await expect(system.locator(".section-text pre").first).to_have_text(first["content"])


"""The page's history (lazy pages, summary and start-over lines), the context inspector and
the memory panel, against what the API says."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
from playwright.async_api import Page, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.ports import ImportedMessage, NewChat
from chat.store import PostgresChatStore
from chat.types import ModelSettings
from llm.testing import FakeOpenAIServer, Reply
from tests.page.conftest import open_page

T0 = datetime(2026, 1, 5, tzinfo=UTC)


async def _long_chat(engine: AsyncEngine, n: int, summary_after: int) -> uuid.UUID:
    """A chat of u1 with n imported lines ("line 0"...), and a summary row after line
    `summary_after`, written the way compaction writes one."""
    chats = PostgresChatStore(engine)
    chat = await chats.create_chat(
        NewChat("default", "u1", "long chat", "You are terse.", ModelSettings(), "queue"))
    rows = [ImportedMessage("user" if i % 2 == 0 else "assistant", f"line {i}", 5,
                            T0 + timedelta(minutes=i)) for i in range(n)]
    assert await chats.import_messages("default", chat.id, rows) is not None
    page = await chats.list_messages("default", chat.id, before=None, after=None, limit=200)
    assert page is not None
    covered = page.messages[summary_after]
    await chats.write_summary(
        chat.id, covered, "## Facts\n- The user drinks **green tea**.", 12,
        {"covers": [page.messages[0].position, covered.position],
         "messages": summary_after + 1, "helper_model": "fake",
         "verification": {"items": 3, "covered": 3, "coverage": 1.0, "missing": []}})
    return chat.id


async def test_scrolling_back_loads_older_pages_past_a_summary_line_that_expands(
    page: Page, engine: AsyncEngine
) -> None:
    await _long_chat(engine, 300, summary_after=39)
    await open_page(page)
    log = page.locator("#log")
    await expect(log.locator(".msg").last).to_have_text("jinline 299")
    shown = await log.locator(".msg").count()
    assert shown < 100  # the newest page only, not the whole chat

    await log.hover()
    summary = log.locator("details.summary")
    for _ in range(60):  # the wheel, as a reader scrolls back
        if await summary.count() and await log.locator(".msg", has_text="line 0").count():
            break
        await page.mouse.wheel(0, -4000)
        await page.wait_for_timeout(100)
    await expect(log.locator(".msg")).to_have_count(300)
    await expect(summary).to_have_count(1)
    await expect(summary.locator("summary")).to_have_text(
        "earlier conversation summarised: 40 messages")
    # The line sits between the last message it covers and the first one after it.
    before = summary.locator("xpath=preceding-sibling::article[1]")
    after = summary.locator("xpath=following-sibling::article[1]")
    await expect(before).to_contain_text("line 39")
    await expect(after).to_contain_text("line 40")
    await expect(summary.locator(".md")).to_be_hidden()
    await summary.locator("summary").click()
    await expect(summary.locator(".md strong")).to_have_text("green tea")
    await expect(summary).to_contain_text("verified coverage 100%")


async def test_start_over_draws_its_line_and_the_model_sees_nothing_before_it(
    page: Page, model: FakeOpenAIServer, jin: str
) -> None:
    model.push(Reply(["first answer"]))
    await open_page(page)
    await page.locator("#input").fill("remember nothing")
    await page.locator("#input").press("Enter")
    await expect(page.locator(".msg.assistant .content")).to_have_text("first answer")
    await page.locator("#start-over").click()
    line = page.locator("details.reset")
    await expect(line.locator("summary")).to_have_text(
        "started over here: the model sees nothing above this line")

    model.push(Reply(["fresh"]))
    await page.locator("#input").fill("hello again")
    await page.locator("#input").press("Enter")
    await expect(page.locator(".msg.assistant .content").last).to_have_text("fresh")
    sent = [m["content"] for m in model.requests[-1]["messages"] if m["role"] != "system"]
    assert sent == ["hello again"]
    # The line stays between the two turns.
    await expect(line.locator("xpath=following-sibling::article[1]")).to_contain_text(
        "hello again")


async def test_the_inspector_shows_each_section_against_the_budget_and_recalled_scores(
    page: Page, model: FakeOpenAIServer, jin: str
) -> None:
    async with httpx.AsyncClient(base_url=jin) as client:
        added = await client.post("/v1/memories", json={
            "user_id": "u1", "text": "The user's cat is called Mochi."})
        assert added.status_code == 201, added.text
        model.push(Reply(["Hi."]))
        await open_page(page)
        await page.locator("#input").fill("hello")
        await page.locator("#input").press("Enter")
        await expect(page.locator(".msg.assistant .content")).to_have_text("Hi.")

        draft = "what is my cat called"
        await page.locator("#input").fill(draft)
        await page.keyboard.press("Alt+i")
        view = page.locator("#context-view")
        chat_id = (await client.get("/v1/chats", params={"user_id": "u1"})).json()[
            "chats"][0]["id"]
        context = (await client.get(f"/v1/chats/{chat_id}/context",
                                    params={"message": draft})).json()
        await expect(view.locator(".section")).to_have_count(len(context["sections"]))

    for section in context["sections"]:
        row = view.locator(f".section[data-name='{section['name']}']")
        await expect(row.locator(".tokens")).to_have_text(f"{section['tokens']:,} tok")
        bar = row.locator("[role=meter]")
        await expect(bar).to_have_attribute("aria-valuenow", str(section["tokens"]))
        await expect(bar).to_have_attribute("aria-valuemax", str(context["budget"]["total"]))
        await expect(bar.locator(".trigger")).to_have_count(1)
    await expect(view.locator(".overview")).to_contain_text(
        f"{context['total_tokens']:,} of {context['budget']['total']:,} tokens")

    # The recalled fact, with each of its scores as the API gives them.
    [item] = [i for i in context["recalled"] if "Mochi" in i["text"]]
    row = view.locator(f".recalled-item[data-id='{item['id']}']")
    # Each search's own measure (cosine, BM25) and rank, then fusion, recency and weight.
    for name in ("dense", "keyword", "fused", "recency", "weight"):
        await expect(row.locator(f".{name}")).to_have_text(f"{item['scores'][name]:.3f}")
    for name in ("dense_rank", "keyword_rank"):
        await expect(row.locator(f".{name}")).to_have_text(str(item["scores"][name]))

    # A section's exact text, on demand: the new message and the recalled memory fence.
    new = view.locator(".section[data-name='new_message']")
    await new.get_by_role("button", name="text").click()
    await expect(new.locator(".section-text pre")).to_have_text(draft)
    memory = view.locator(".section[data-name='memory']")
    await memory.get_by_role("button", name="text").click()
    fence = context["messages"][-2]["content"]
    assert "Mochi" in fence
    await expect(memory.locator(".section-text pre")).to_have_text(fence)
    await expect(view).to_contain_text("would not compact")


async def test_a_fact_is_forgotten_from_the_memory_panel(
    page: Page, jin: str
) -> None:
    async with httpx.AsyncClient(base_url=jin) as client:
        for text in ("The user lives in Lviv.", "The user's sister is called Oksana."):
            assert (await client.post("/v1/memories", json={
                "user_id": "u1", "text": text})).status_code == 201
        await open_page(page)
        await page.keyboard.press("Alt+m")
        facts = page.locator("#facts .fact")
        await expect(facts).to_have_count(2)
        lviv = facts.filter(has_text="Lviv")
        await lviv.get_by_role("button", name="forget").click()
        await expect(facts).to_have_count(1)
        await expect(facts).to_contain_text("Oksana")
        left = (await client.get("/v1/memories", params={"user_id": "u1"})).json()["items"]
    assert [f["text"] for f in left] == ["The user's sister is called Oksana."]

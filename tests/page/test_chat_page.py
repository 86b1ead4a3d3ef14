"""Chatting from the page: answers stream in, stop works, reasoning stays apart, and what a
model writes is shown as text, never run."""

from __future__ import annotations

import httpx
from playwright.async_api import Page, expect

from llm.testing import FakeOpenAIServer, Reply
from tests.page.conftest import open_page


async def test_a_message_sent_with_enter_streams_its_answer_in(
    page: Page, model: FakeOpenAIServer, jin: str
) -> None:
    model.push(Reply([f"word{i} " for i in range(30)], chunk_delay=0.03))
    await open_page(page)
    await page.locator("#input").fill("Say thirty words")
    await page.locator("#input").press("Enter")

    answer = page.locator(".msg.assistant .content").last
    # Seen part way, while the step still runs: the input is the stop control.
    await expect(answer).to_contain_text("word3")
    await expect(page.locator("#send")).to_have_text("stop")
    assert "word29" not in await answer.inner_text()
    await expect(answer).to_contain_text("word29")
    await expect(page.locator("#send")).to_have_text("send")
    await expect(page.locator(".msg.user .content").last).to_have_text("Say thirty words")
    # The chat was made on the fly and named after the message; the history holds the turn.
    await expect(page.locator("#chat-list .chat.selected")).to_contain_text("Say thirty words")
    async with httpx.AsyncClient(base_url=jin) as client:
        chats = (await client.get("/v1/chats", params={"user_id": "u1"})).json()["chats"]
        rows = (await client.get(f"/v1/chats/{chats[0]['id']}/messages")).json()["messages"]
    assert [r["kind"] for r in rows] == ["user", "assistant"]
    assert rows[1]["content"].startswith("word0 word1")

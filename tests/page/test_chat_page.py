"""Chatting from the page: answers stream in, stop works, reasoning stays apart, and what a
model writes is shown as text, never run."""

from __future__ import annotations

import re

import httpx
from playwright.async_api import Page, expect

from llm.testing import FakeOpenAIServer, Reply
from tests.page.conftest import open_page


async def test_a_message_sent_with_enter_streams_its_answer_in(
    page: Page, model: FakeOpenAIServer, jin: str
) -> None:
    # Slow enough (4 s) that a busy machine still sees the answer part way.
    model.push(Reply([f"word{i} " for i in range(40)], chunk_delay=0.1))
    await open_page(page)
    await page.locator("#input").fill("Say forty words")
    await page.locator("#input").press("Enter")

    answer = page.locator(".msg.assistant .content").last
    # Seen part way, while the step still runs: the input is the stop control.
    await expect(answer).to_contain_text("word3")
    await expect(page.locator("#send")).to_have_text("stop")
    assert "word39" not in await answer.inner_text()
    await expect(answer).to_contain_text("word39", timeout=15_000)
    await expect(page.locator("#send")).to_have_text("send")
    await expect(page.locator(".msg.user .content").last).to_have_text("Say forty words")
    # The chat was made on the fly and named after the message; the history holds the turn.
    await expect(page.locator("#chat-list .chat.selected")).to_contain_text("Say forty words")
    async with httpx.AsyncClient(base_url=jin) as client:
        chats = (await client.get("/v1/chats", params={"user_id": "u1"})).json()["chats"]
        rows = (await client.get(f"/v1/chats/{chats[0]['id']}/messages")).json()["messages"]
    assert [r["kind"] for r in rows] == ["user", "assistant"]
    assert rows[1]["content"].startswith("word0 word1")


async def _send(page: Page, text: str) -> None:
    await page.locator("#input").fill(text)
    await page.locator("#input").press("Enter")


async def test_escape_stops_a_slow_answer_and_the_stopped_part_is_kept(
    page: Page, model: FakeOpenAIServer, jin: str
) -> None:
    model.push(Reply([f"slow{i} " for i in range(200)], chunk_delay=0.1))
    await open_page(page)
    await _send(page, "Talk slowly")
    answer = page.locator(".msg.assistant").last
    await expect(answer.locator(".content")).to_contain_text("slow2")
    await page.keyboard.press("Escape")

    # (The tokens the stopped call took, which its server never got to say: jin counts them.)
    await expect(answer.locator(".note")).to_have_text(re.compile(r"^stopped · \d+ tokens$"),
                                                       timeout=10_000)
    await expect(page.locator("#send")).to_have_text("send")
    shown = await answer.locator(".content").inner_text()
    assert "slow199" not in shown
    async with httpx.AsyncClient(base_url=jin) as client:
        chat = (await client.get("/v1/chats", params={"user_id": "u1"})).json()["chats"][0]
        rows = (await client.get(f"/v1/chats/{chat['id']}/messages")).json()["messages"]
    assert rows[-1]["status"] == "interrupted", rows
    # The page shows what was kept, once the stored row has taken the live one's place (the
    # swap is its own request after the stream: read at once, the text was sometimes missing).
    await expect(page.locator(".msg.assistant").last.locator(".content")).to_have_text(
        rows[-1]["content"].strip())
    # The chat works on: the next message gets its answer.
    model.push(Reply(["still here"]))
    await _send(page, "Are you there?")
    await expect(page.locator(".msg.assistant .content").last).to_have_text("still here")


async def test_the_reasoning_shows_apart_from_the_answer_and_folds_away(
    page: Page, model: FakeOpenAIServer
) -> None:
    model.push(Reply(["The answer is 4."], reasoning=["Two plus two ", "makes four."],
                     chunk_delay=0.05))
    await open_page(page)
    await _send(page, "2+2?")
    answer = page.locator(".msg.assistant").last
    await expect(answer.locator(".content")).to_have_text("The answer is 4.")
    reasoning = answer.locator("details.reasoning")
    await expect(reasoning).not_to_have_attribute("open", "")  # folded once the answer came
    await reasoning.locator("summary").click()
    await expect(reasoning.locator(".reasoning-text")).to_have_text("Two plus two makes four.")
    assert "Two plus two" not in await answer.locator(".content").inner_text()
    # Read back from the history, the two stay apart too.
    await page.reload()
    await page.locator("body[data-ready]").wait_for(state="attached")
    stored = page.locator(".msg.assistant").last
    await expect(stored.locator(".content")).to_have_text("The answer is 4.")
    await expect(stored.locator(".reasoning-text")).to_have_text("Two plus two makes four.",
                                                                 use_inner_text=False)


HOSTILE = (
    "<script>document.title = 'pwned-script'</script> and "
    "<img src=x onerror=\"document.title = 'pwned-img'\"> and "
    "[click](javascript:document.title='pwned-link') and **bold** and `<b>code</b>`\n\n"
    "```html\n<script>document.title = 'pwned-code'</script>\n```\n"
    "- item <iframe src=\"javascript:alert(1)\"></iframe>\n"
)


async def test_a_hostile_answer_renders_as_text_and_runs_nothing(
    page: Page, model: FakeOpenAIServer
) -> None:
    model.push(Reply([HOSTILE[i : i + 17] for i in range(0, len(HOSTILE), 17)]))
    await open_page(page)
    title = await page.title()
    await _send(page, "Attack the page")
    content = page.locator(".msg.assistant .content").last
    await expect(content).to_contain_text("<script>document.title = 'pwned-script'</script>")
    await expect(content).to_contain_text("<img src=x onerror=")
    await expect(content.locator("pre code")).to_have_text(
        "<script>document.title = 'pwned-code'</script>")
    await expect(content.locator("strong")).to_have_text("bold")
    await expect(content.locator("code").first).to_have_text("<b>code</b>")
    for tag in ("script", "img", "iframe", "b", "a"):
        assert await content.locator(tag).count() == 0, tag
    await page.wait_for_timeout(300)  # an onerror would have fired by now
    assert await page.title() == title


async def test_a_provider_error_shows_inline_and_retry_sends_again(
    page: Page, model: FakeOpenAIServer
) -> None:
    model.push(Reply(status=500, error="the model is on fire"))
    await open_page(page)
    await _send(page, "Hello?")
    error = page.locator(".msg.assistant .error").last
    await expect(error).to_contain_text("provider_error")
    model.push(Reply(["Hello again."]))
    await error.locator("button.retry").click()
    await expect(page.locator(".msg.assistant .content").last).to_have_text("Hello again.")
    await expect(page.locator(".msg.user .content")).to_have_count(2)


async def test_a_detected_loop_shows_inline_with_its_preview_and_retry_answers_anew(
    page: Page, model: FakeOpenAIServer
) -> None:
    model.push(Reply(["Sure. "] + ["yes "] * 400, chunk_delay=0.002))
    await open_page(page)
    await _send(page, "say yes")
    answer = page.locator(".msg.assistant").last
    error = answer.locator(".error")
    await expect(error.locator("code")).to_have_text("loop_detected")
    await expect(error).to_contain_text("word_loop")
    await expect(error.locator(".preview")).to_have_text(" ".join(["yes"] * 8))
    await expect(answer.locator(".note")).to_have_text(re.compile(r"^stopped · \d+ tokens$"))
    await expect(page.locator("#send")).to_have_text("send")

    model.push(Reply(["No more loops."]))
    await error.locator("button.retry").click()
    await expect(page.locator(".msg.assistant .content").last).to_have_text("No more loops.")
    await expect(page.locator(".msg.user .content")).to_have_count(2)
    await expect(page.locator(".msg.user .content").last).to_have_text("say yes")
    # Read back from the history, the stopped answer still says why, with what repeated.
    await page.reload()
    await page.locator("body[data-ready]").wait_for(state="attached")
    stored = page.locator(".msg.assistant").first.locator(".error")
    await expect(stored.locator("code")).to_have_text("loop_detected")
    await expect(stored.locator(".preview")).to_have_text(" ".join(["yes"] * 8))
    await expect(page.locator(".msg.assistant .error")).to_have_count(1)


async def test_the_memory_tools_show_as_compact_lines(
    page: Page, model: FakeOpenAIServer
) -> None:
    model.push(
        Reply(["Let me note that. "], tool_calls=[
            {"name": "remember", "arguments": {"text": "The user's cat is called Miso."}}]),
        Reply(["Noted: Miso."]),
    )
    await open_page(page)
    await _send(page, "my cat is called Miso")
    answer = page.locator(".msg.assistant").last
    await expect(answer.locator(".content")).to_have_text("Let me note that. Noted: Miso.")
    await expect(answer.locator(".action")).to_contain_text(
        "remembered The user's cat is called Miso.")
    await expect(answer.locator(".action")).to_contain_text("added")


async def test_a_web_search_shows_as_one_line_and_its_marker_never_shows(
    page: Page, model: FakeOpenAIServer
) -> None:
    """No search provider here: the marker's search fails, and the answer goes on."""
    model.push(Reply(["One moment. <WEB_", "SEARCH: capital of Ukraine>"]),
               Reply(["I could not search."]))
    await open_page(page)
    await _send(page, "what is the capital of Ukraine?")
    answer = page.locator(".msg.assistant").last
    await expect(answer.locator(".content")).to_have_text("One moment. I could not search.")
    await expect(answer.locator(".action")).to_have_count(1)  # started, then failed: one line
    await expect(answer.locator(".action")).to_contain_text(
        "searched capital of Ukraine · failed FAILED: no web search provider is configured")


async def test_chats_are_created_renamed_switched_and_deleted_from_the_list(
    page: Page, model: FakeOpenAIServer, jin: str
) -> None:
    model.push(Reply(["one"]), Reply(["two"]))
    await open_page(page)
    await _send(page, "first chat")
    await expect(page.locator(".msg.assistant .content")).to_have_text("one")
    await page.keyboard.press("Alt+n")
    await expect(page.locator(".msg")).to_have_count(0)
    await _send(page, "second chat")
    await expect(page.locator(".msg.assistant .content")).to_have_text("two")
    items = page.locator("#chat-list .chat")
    await expect(items).to_have_count(2)

    await page.keyboard.press("Alt+ArrowDown")  # the older chat
    await expect(page.locator(".msg.user .content")).to_have_text("first chat")
    await items.nth(1).locator(".rename").click()
    await page.locator(".title-edit").fill("Renamed")
    await page.locator(".title-edit").press("Enter")
    await expect(items.nth(1)).to_contain_text("Renamed")
    await expect(page.locator("#chat-title")).to_have_text("Renamed")

    page.once("dialog", lambda d: d.accept())
    await items.nth(1).locator(".delete").click()
    await expect(items).to_have_count(1)
    await expect(page.locator(".msg.user .content")).to_have_text("second chat")
    async with httpx.AsyncClient(base_url=jin) as client:
        chats = (await client.get("/v1/chats", params={"user_id": "u1"})).json()["chats"]
    assert [c["title"] for c in chats] == ["second chat"]

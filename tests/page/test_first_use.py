"""First use: the page asks who is chatting, and for an API key once keys exist; the page and
its files are public, the API behind it is not."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from playwright.async_api import Browser, expect
from sqlalchemy.ext.asyncio import AsyncEngine

from api.keys import KeyStore
from llm.testing import FakeOpenAIServer, Reply


async def _open(browser: Browser, base: str):  # type: ignore[no-untyped-def]
    context = await browser.new_context(base_url=base)
    page = await context.new_page()
    await page.goto("/")
    return context, page


async def test_a_new_user_picks_a_user_id_and_chats_under_it(
    browser: Browser, jin: str, model: FakeOpenAIServer
) -> None:
    context, page = await _open(browser, jin)
    dialog = page.locator("#setup")
    await expect(dialog).to_be_visible()
    await expect(page.locator("#setup-key-label")).to_be_hidden()  # no keys on this jin
    await page.locator("#setup-user").fill("ada")
    await page.locator("#setup-user").press("Enter")
    await expect(dialog).to_be_hidden()
    await expect(page.locator("#user-label")).to_have_text("ada")
    model.push(Reply(["Hello, Ada."]))
    await page.locator("#input").fill("hi")
    await page.locator("#input").press("Enter")
    await expect(page.locator(".msg.assistant .content")).to_have_text("Hello, Ada.")
    await context.close()
    async with httpx.AsyncClient(base_url=jin) as client:
        chats = (await client.get("/v1/chats", params={"user_id": "ada"})).json()["chats"]
    assert len(chats) == 1


async def test_with_keys_the_page_is_public_and_asks_for_a_key_that_works(
    browser: Browser, jin_factory: Callable[..., str], engine: AsyncEngine
) -> None:
    _, secret = await KeyStore(engine).create("acme", "page")
    base = jin_factory(auth_cache_seconds=0)
    async with httpx.AsyncClient(base_url=base) as anonymous:
        home = await anonymous.get("/")
        assert home.status_code == 200 and "text/html" in home.headers["content-type"]
        assert "script-src 'self'" in home.headers["content-security-policy"]
        assert (await anonymous.get("/ui/js/main.js")).status_code == 200
        assert (await anonymous.get("/v1/chats")).status_code == 401

    context, page = await _open(browser, base)
    await expect(page.locator("#setup")).to_be_visible()
    await page.locator("#setup-user").fill("grace")
    await page.locator("#setup-user").press("Enter")
    key = page.locator("#setup-key")
    await expect(key).to_be_visible()
    await expect(page.locator("#setup-error")).to_have_text("This jin needs an API key.")
    await key.fill("jin_not_a_key")
    await key.press("Enter")
    await expect(page.locator("#setup-error")).to_have_text("This key was refused.")
    await key.fill(secret)
    await key.press("Enter")
    await expect(page.locator("#setup")).to_be_hidden()
    await page.locator("#new-chat").click()
    await expect(page.locator("#chat-list .chat")).to_have_count(1)
    await context.close()
    async with httpx.AsyncClient(base_url=base,
                                 headers={"Authorization": f"Bearer {secret}"}) as acme:
        chats = (await acme.get("/v1/chats", params={"user_id": "grace"})).json()["chats"]
    assert len(chats) == 1

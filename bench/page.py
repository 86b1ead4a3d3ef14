"""The web page in headless Chromium: first paint and readiness on a chat of 10,000 messages,
and the cost of drawing a streamed answer at 100 chunks a second.

    .venv/bin/python bench/page.py [--messages 10000] [--runs 5]

Real `jin serve`, the fake model server (its own process, 100 chunks/s) and Postgres (embedded
unless DATABASE_URL); Debian's chromium (or JIN_CHROMIUM) driven by Playwright. Prints figures;
never passes or fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import uuid
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import database, fake_model, jin_worker
from chat.ports import ImportedMessage, NewChat
from chat.store import PostgresChatStore
from chat.types import ModelSettings
from db.engine import create_engine
from tests.page.conftest import CHROMIUM_ARGS, chromium_path

USER = "bench"
LINE = ("Point {i}: the **lease** is a row, not a held connection; see `steps.lease_until` "
        "and https://example.org/{i} for more.")
CHUNK_RATE = 100  # chunks a second, as the fake model sends them


async def seed(url: str, n: int) -> uuid.UUID:
    """A chat of n imported messages of a few Markdown spans each."""
    engine = create_engine(url, pool_size=2)
    try:
        chats = PostgresChatStore(engine)
        chat = await chats.create_chat(
            NewChat("default", USER, f"{n:,} messages", "", ModelSettings(), "queue"))
        t0 = datetime(2026, 1, 1, tzinfo=UTC)
        for start in range(0, n, 2000):
            rows = [ImportedMessage("user" if i % 2 == 0 else "assistant", LINE.format(i=i), 30,
                                    t0 + timedelta(seconds=i))
                    for i in range(start, min(n, start + 2000))]
            assert await chats.import_messages("default", chat.id, rows) is not None
        return chat.id
    finally:
        await engine.dispose()


async def new_page(browser: Browser, jin: str, chat_id: uuid.UUID) -> Any:
    context = await browser.new_context(base_url=jin, viewport={"width": 1280, "height": 800})
    await context.add_init_script(f"localStorage.setItem('jin.user', '{USER}')")
    return context, await context.new_page()


async def load_figures(browser: Browser, jin: str, chat_id: uuid.UUID) -> dict[str, float]:
    """Milliseconds from navigation to first paint, and to the page answering input (the
    newest page of history drawn, the message box wired and focused)."""
    context, page = await new_page(browser, jin, chat_id)
    await page.goto(f"/#chat={chat_id}")
    await page.locator("body[data-ready]").wait_for(state="attached")
    marks = await page.evaluate("""() => ({
        paint: performance.getEntriesByName('first-contentful-paint')[0]?.startTime,
        ready: performance.getEntriesByName('jin-ready')[0]?.startTime,
        rows: document.querySelectorAll('#log .msg').length,
    })""")
    await context.close()
    return marks


async def stream_figures(browser: Browser, jin: str, chat_id: uuid.UUID,
                         chunks: int) -> dict[str, float]:
    """One answer of `chunks` chunks at CHUNK_RATE a second: chunks the page saw, whether its
    text is whole, and the page's drawing time per chunk and per frame drawn."""
    context, page = await new_page(browser, jin, chat_id)
    await page.goto(f"/#chat={chat_id}")
    await page.locator("body[data-ready]").wait_for(state="attached")
    message = " ".join(f"word{i} **b{i}** `c{i}`" for i in range(chunks // 2 + 5))
    await page.evaluate("() => Object.assign(window.jin.stats, {chunks: 0, chars: 0, "
                        "renders: 0, renderMs: 0})")
    await page.locator("#input").fill(message)
    await page.locator("#input").press("Enter")
    # The stored answer takes the live one's place once the step has ended.
    await page.locator(".msg.assistant[data-position]").wait_for(timeout=chunks * 50 + 30_000)
    stats = await page.evaluate("() => ({...window.jin.stats})")
    answer = page.locator(".msg.assistant")
    shown = await answer.locator(".content").inner_text()
    status = await answer.get_attribute("data-status")
    await context.close()
    sent = echo_chunks(message, chunks)
    return {**stats, "sent": len(sent), "sent_chars": len("".join(sent)), "status": status,
            "whole": all(w.strip("*`") in shown for w in message.split())}


def echo_chunks(message: str, n: int) -> list[str]:
    """The chunks the fake model sends for `message` (llm/testing.py's echo, cut in n)."""
    text = f"echo: {message}"
    size = -(-len(text) // n)
    return [text[i : i + size] for i in range(0, len(text), size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    path = chromium_path()
    if path is None:
        raise SystemExit("no Chromium: apt-get install -y chromium (or set JIN_CHROMIUM)")
    with ExitStack() as stack:
        url = database(stack)  # (migrates with asyncio.run: outside the loop below)
        results = asyncio.run(measure(stack, url, path, args))
    report(args, results)


async def measure(stack: ExitStack, url: str, path: str,
                  args: argparse.Namespace) -> dict[Any, Any]:
    big = await seed(url, args.messages)
    results: dict[Any, Any] = {}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        for chunks in (100, 1000):
            model = fake_model(stack, chunks=chunks, chunk_delay=1 / CHUNK_RATE)
            jin = jin_worker(stack, url, model)
            if chunks == 100:
                await load_figures(browser, jin, big)  # warm: Postgres's cache, the worker
                results["load"] = [await load_figures(browser, jin, big)
                                   for _ in range(args.runs)]
            results[chunks] = [await stream_figures(browser, jin, await seed(url, 0), chunks)
                               for _ in range(args.runs)]
        await browser.close()
    return results


def report(args: argparse.Namespace, results: dict[str, Any]) -> None:
    loads = results["load"]
    paint = [r["paint"] for r in loads]
    ready = [r["ready"] for r in loads]
    print(f"chat of {args.messages:,} messages, {loads[0]['rows']} rows drawn at open; "
          f"median of {args.runs} (lowest - highest):")
    print(f"  first contentful paint {statistics.median(paint):.0f} ms "
          f"({min(paint):.0f} - {max(paint):.0f})")
    print(f"  answers input          {statistics.median(ready):.0f} ms "
          f"({min(ready):.0f} - {max(ready):.0f})")
    for chunks in (100, 1000):
        runs = results[chunks]
        per_chunk = [r["renderMs"] / max(r["chunks"], 1) for r in runs]
        per_frame = [r["renderMs"] / max(r["renders"], 1) for r in runs]
        dropped = sum(r["sent"] - r["chunks"] + r["sent_chars"] - r["chars"] for r in runs)
        print(f"answer of {runs[0]['sent']} chunks at {CHUNK_RATE}/s: chunks seen "
              f"{sorted({r['chunks'] for r in runs})}, dropped {dropped}, text whole in "
              f"{sum(r['whole'] for r in runs)}/{len(runs)} "
              f"({', '.join(sorted({r['status'] for r in runs}))}); frames drawn "
              f"{statistics.median(r['renders'] for r in runs):.0f}; drawing "
              f"{statistics.median(per_chunk):.3f} ms a chunk "
              f"({min(per_chunk):.3f} - {max(per_chunk):.3f}), "
              f"{statistics.median(per_frame):.3f} ms a frame")


if __name__ == "__main__":
    main()

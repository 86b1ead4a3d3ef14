"""Reading jin's SSE stream the way a frontend would."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from llm.sse import SSEDecoder

SSE = {"Accept": "text/event-stream"}


def parse_events(raw: str) -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    name = ""
    decoder = SSEDecoder()
    for line in raw.split("\n"):
        if line.startswith("event:"):
            name = line.partition(":")[2].strip()
        data = decoder.feed(line)
        if data is not None:
            events.append((name, json.loads(data)))
    return events


async def stream_step(
    client: httpx.AsyncClient, chat_id: str, content: str, **extra: Any
) -> list[tuple[str, dict[str, Any]]]:
    response = await client.post(
        f"/v1/chats/{chat_id}/messages", json={"content": content, **extra}, headers=SSE
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_events(response.text)


async def streaming_step(
    client: httpx.AsyncClient, chat_id: str, content: str, **extra: Any
) -> asyncio.Task[list[tuple[str, dict[str, Any]]]]:
    """A streamed step whose first answer chunk has arrived, and the task reading the rest.

    What a test races against (a second tab, an abort, a reset) then meets a step that holds
    the chat and is streaming, however slow the machine: a fixed sleep could still find it
    queued or not yet at the model.
    """
    started = asyncio.Event()

    async def read() -> list[tuple[str, dict[str, Any]]]:
        body = ""
        async with client.stream(
            "POST", f"/v1/chats/{chat_id}/messages", json={"content": content, **extra},
            headers=SSE,
        ) as response:
            assert response.status_code == 200, await response.aread()
            async for text in response.aiter_text():
                body += text
                if not started.is_set() and "event: message_chunk" in body:
                    started.set()
        started.set()
        return parse_events(body)

    task = asyncio.create_task(read())
    waiter = asyncio.create_task(started.wait())
    await asyncio.wait({task, waiter}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task.done():
        task.result()  # the step failed or ended before it streamed: say how
    assert started.is_set(), "the step sent no answer chunk within 30 s"
    return task


async def new_chat(client: httpx.AsyncClient, **fields: Any) -> str:
    body = {"user_id": "u1", "title": "t", "system_prompt": "You are terse.", **fields}
    response = await client.post("/v1/chats", json=body)
    assert response.status_code == 201, response.text
    return response.json()["id"]


async def history(client: httpx.AsyncClient, chat_id: str, **params: Any) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/chats/{chat_id}/messages", params={"limit": 200, **params})
    assert response.status_code == 200, response.text
    return response.json()["messages"]

"""A WebSocket client of `/ws/chat`, as a frontend would hold one (the `websockets` package)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

WAIT = 15.0  # seconds a test waits for one frame


def socket_url(base: str, chat_id: str) -> str:
    return f"{base.replace('http://', 'ws://', 1)}/ws/chat?chat_id={chat_id}"


@asynccontextmanager
async def following(base: str, chat_id: str, key: str | None = None,
                    **options: Any) -> AsyncIterator[ClientConnection]:
    """A socket that follows the chat: open, and told so (`subscribed`) before it is used.
    With `key`, sent the way a browser can: as a subprotocol beside `jin`."""
    protocols = ["jin", f"jin.key.{key}"] if key else ["jin"]
    async with connect(socket_url(base, chat_id), subprotocols=protocols,
                       open_timeout=WAIT, **options) as ws:
        assert await frame(ws) == {"type": "subscribed", "chat_id": chat_id}
        yield ws


async def frame(ws: ClientConnection) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(await asyncio.wait_for(ws.recv(), WAIT))
    return body


async def frames_until(ws: ClientConnection, kind: str) -> list[dict[str, Any]]:
    """Frames up to and with the first of `kind`."""
    seen = [await frame(ws)]
    while seen[-1]["type"] != kind:
        seen.append(await frame(ws))
    return seen


async def refusal(ws: ClientConnection) -> tuple[dict[str, Any], int]:
    """The error frame of a socket jin closes, and the close code."""
    said = await frame(ws)
    try:
        await asyncio.wait_for(ws.recv(), WAIT)
    except ConnectionClosed as closed:
        assert closed.rcvd is not None
        return said, closed.rcvd.code
    raise AssertionError("the socket stayed open")


def text_of(frames: list[dict[str, Any]]) -> str:
    return "".join(f["chunk"] for f in frames if f["type"] == "message_chunk")

"""The JIN WebSocket protocol at `/ws/chat`: what a client may send, and the error frames.

The client sends `{"text": ...}` (optionally `"idempotency_key"`, and `"type": "message"`) to
start a step, or `{"type": "abort"}`. It receives step events as JSON objects with a `type`
(api/chat_feed.py), `{"type": "error", "code", "detail"}` for a mistake, and a close code of
4000 + the HTTP status the same mistake gets over HTTP when the socket cannot go on.

The key: `Authorization: Bearer <key>` where the client can set headers, else the subprotocol
`jin.key.<key>` beside `jin` (a browser's `new WebSocket(url, ["jin", "jin.key." + key])`);
jin answers with `jin` and never echoes the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from starlette.types import Receive, Scope, Send

SUBPROTOCOL = "jin"
KEY_SUBPROTOCOL = "jin.key."
MAX_DETAIL = 100  # a close reason is at most 123 bytes


@dataclass(frozen=True)
class Say:
    text: str
    idempotency_key: str | None = None
    type: str = "message"


@dataclass(frozen=True)
class Abort:
    type: str = "abort"


@dataclass(frozen=True)
class Mistake:
    """A frame jin cannot act on: `code` as over HTTP where one exists."""

    status: int
    code: str
    detail: str


def read_frame(raw: str | bytes | None) -> Say | Abort | Mistake:
    """A client's frame -> what it asks."""
    if raw is None:
        return Mistake(400, "bad_request", "send JSON text frames")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return Mistake(400, "bad_request", "the frame is not JSON")
    if not isinstance(body, dict):
        return Mistake(422, "invalid_request", "a frame is a JSON object")
    kind = body.get("type", "message")
    if kind == "abort":
        return Abort()
    if kind != "message":
        return Mistake(422, "unknown_type",
                       f"unknown type {str(kind)[:40]!r}: send `message` or `abort`")
    text, key = body.get("text"), body.get("idempotency_key")
    if not isinstance(text, str) or not text.strip():
        return Mistake(422, "invalid_request", "`text` must be a non-empty string")
    if key is not None and (not isinstance(key, str) or not 1 <= len(key) <= 200):
        return Mistake(422, "invalid_request",
                       "`idempotency_key` must be a string of 1 to 200 characters")
    return Say(text, key)


def error_frame(code: str, detail: str) -> str:
    return json.dumps({"type": "error", "code": code, "detail": detail}, ensure_ascii=False)


def close_code(status: int) -> int:
    """4000 + the HTTP status: 4401 no key, 4404 no such chat, 4422 a bad chat id..."""
    return 4000 + status


def authorization(scope: Scope) -> str | None:
    """The caller's credentials as an `Authorization` value: the header, else the key
    subprotocol."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            return str(value.decode("latin-1"))
    offered: str
    for offered in scope.get("subprotocols", ()):
        if offered.startswith(KEY_SUBPROTOCOL):
            return "Bearer " + offered[len(KEY_SUBPROTOCOL):]
    return None


def chosen_subprotocol(scope: Scope) -> str | None:
    """`jin` when the client offered it (a browser drops a socket that offered subprotocols
    and got none back)."""
    return SUBPROTOCOL if SUBPROTOCOL in scope.get("subprotocols", ()) else None


async def refuse(scope: Scope, receive: Receive, send: Send, mistake: Mistake) -> None:
    """Accept only to say why not, then close: a browser sees no HTTP status of a refused
    handshake, but it reads this frame and the close code."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept", "subprotocol": chosen_subprotocol(scope)})
    await send({"type": "websocket.send", "text": error_frame(mistake.code, mistake.detail)})
    await send({"type": "websocket.close", "code": close_code(mistake.status),
                "reason": mistake.code})

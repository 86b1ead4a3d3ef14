"""The posted message's way past FastAPI (api/shortcut.py): what takes it, and what it leaves
to FastAPI exactly as it came."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from api import problems, shortcut
from orchestrator.errors import ChatNotFound

CHAT = str(uuid.uuid4())


class Inner:
    """Stands for FastAPI's machinery: records what reached it, body included."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        await JSONResponse({"via": "fastapi"})(scope, receive, send)


async def _post(layer: shortcut.Shortcut, path: str, chunks: list[bytes],
                content_type: bytes = b"application/json", method: str = "POST") -> Any:
    messages: list[Message] = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)]
    sent: list[Message] = []

    async def receive() -> Message:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "root_path": "",
             "headers": [(b"content-type", content_type)], "query_string": b"",
             "state": {"tenant": "t"}, "app": layer.fastapi}
    await layer(scope, receive, send)
    return sent[0]["status"], json.loads(sent[1]["body"])


@pytest.fixture
def layer(monkeypatch: pytest.MonkeyPatch) -> shortcut.Shortcut:
    async def step_response(request: Any, runtime: Any, tenant: str, chat_id: uuid.UUID,
                            body: Any) -> JSONResponse:
        if body.content == "missing":
            raise ChatNotFound(f"chat {chat_id} does not exist")
        return JSONResponse({"via": "shortcut", "tenant": tenant, "chat": str(chat_id),
                             "content": body.content})

    monkeypatch.setattr(shortcut, "step_response", step_response)
    app = FastAPI()
    problems.install(app)
    app.state.runtime = object()
    return shortcut.Shortcut(Inner(), fastapi=app)


async def test_a_plain_posted_message_skips_fastapi_even_in_pieces(layer: Any) -> None:
    status, body = await _post(layer, f"/v1/chats/{CHAT}/messages", [b'{"content": "h', b'i"}'])
    assert (status, body) == (200, {"via": "shortcut", "tenant": "t", "chat": CHAT,
                                    "content": "hi"})
    assert layer.app.bodies == []


@pytest.mark.parametrize("path, chunks, content_type, method", [
    (f"/v1/chats/{CHAT}/messages", [b'{"content": 5}'], b"application/json", "POST"),
    (f"/v1/chats/{CHAT}/messages", [b'{"content": "hi", "extra": 1}'], b"application/json",
     "POST"),
    (f"/v1/chats/{CHAT}/messages", [b'{"content": "h', b'i"'], b"application/json", "POST"),
    (f"/v1/chats/{CHAT}/messages", [b'{"content": "hi"}'], b"text/plain", "POST"),
    (f"/v1/chats/{CHAT}/messages/", [b'{"content": "hi"}'], b"application/json", "POST"),
    ("/v1/chats/not-a-uuid/messages", [b'{"content": "hi"}'], b"application/json", "POST"),
    (f"/v1/chats/{CHAT}/messages", [b""], b"application/json", "GET"),
])
async def test_anything_unusual_reaches_fastapi_with_its_body_intact(
    layer: Any, path: str, chunks: list[bytes], content_type: bytes, method: str,
) -> None:
    status, body = await _post(layer, path, chunks, content_type, method)
    assert (status, body) == (200, {"via": "fastapi"})
    assert layer.app.bodies == [b"".join(chunks)]


async def test_errors_are_answered_by_the_apps_own_handlers(layer: Any) -> None:
    status, body = await _post(layer, f"/v1/chats/{CHAT}/messages", [b'{"content": "missing"}'])
    assert status == 404 and body["code"] == "chat_not_found" and CHAT in body["detail"]

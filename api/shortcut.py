"""A posted message's way past FastAPI's request machinery, when nothing about it is unusual.

A step is the request jin serves most, and FastAPI's routing, body parsing, dependencies and
validation cost a worker ~0.35 ms of each one before the route's code runs (bench/README.md).
This ASGI layer sits where FastAPI's machinery begins (inside the edge: the key is checked, the
tenant known): a POST to /v1/chats/{uuid}/messages with a JSON body that PostMessage accepts goes
straight to the route's own function (routes/messages.step_response), its errors through the
app's own exception handlers. Anything else, a body the model refuses among it, goes to FastAPI
untouched (the body replayed), so every error answer stays what FastAPI makes of it.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from fastapi import FastAPI
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.routes import messages
from api.routes.messages import step_response
from api.schemas import PostMessage

_PATH = re.compile(r"^/v1/chats/([0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12})/messages$")


class Shortcut:
    def __init__(self, app: ASGIApp, *, fastapi: FastAPI) -> None:
        self.app, self.fastapi = app, fastapi
        self._route: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _PATH.match(scope["path"]) if scope["type"] == "http" else None
        if (match is None or scope["method"] != "POST" or scope.get("root_path")
                or not _json(scope)):
            await self.app(scope, receive, send)
            return
        messages, body = await _read(receive)
        try:
            posted = None if body is None else PostMessage.model_validate_json(body)
        except ValidationError:
            posted = None
        if posted is None:  # FastAPI answers it, as it would have
            await self.app(scope, _replay(messages, receive), send)
            return
        scope["route"] = self._step_route()  # for the access log and the metrics' labels
        request = Request(scope, receive)
        try:
            response = await step_response(
                request, self.fastapi.state.runtime, scope["state"]["tenant"],
                uuid.UUID(match.group(1)), posted)
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                raise  # to the outermost handler, as from FastAPI's own routes
            response = await handler(request, exc)
        await response(scope, receive, send)

    def _handler(self, exc: Exception) -> Any:
        """The app's handler for this exception, as Starlette picks it (by class, nearest
        first); Exception itself is left to the outermost middleware, which calls it."""
        for cls in type(exc).__mro__:
            if cls is Exception:
                return None
            handler = self.fastapi.exception_handlers.get(cls)
            if handler is not None:
                return handler
        return None

    def _step_route(self) -> Any:
        if self._route is None:  # the route FastAPI itself would put there
            self._route = next(r for r in messages.router.routes
                               if getattr(r, "endpoint", None) is messages.post_message)
        return self._route


def _json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


async def _read(receive: Receive) -> tuple[list[Message], bytes | None]:
    """The messages that brought the body, and the body (None if the client left first)."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        if not message.get("more_body", False):
            return messages, b"".join(m.get("body", b"") for m in messages)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed

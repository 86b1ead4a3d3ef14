"""Errors of the OpenAI-compatible routes in OpenAI's format.

Everything else in jin answers errors as problem documents (api/problems.py), from wherever they
arise: the edge (a key, a rate limit), the body limit, validation, a route. On the OpenAI routes
an OpenAI client must read them, so this outermost layer rewrites each problem document into
`{"error": {"message", "type", "param", "code"}}` with the same `code`. A 422 becomes a 400, as
OpenAI answers a request it cannot take. Other responses pass untouched.
"""

from __future__ import annotations

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.openai_wire import error_body
from api.problems import PROBLEM_TYPE

PATHS = frozenset({"/v1/chat/completions", "/v1/models"})


class OpenAIErrors:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in PATHS:
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body: list[bytes] = []

        async def rewrite(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                if headers.get(b"content-type", b"").startswith(PROBLEM_TYPE.encode()):
                    start = message  # held until its body is whole
                    return
            elif start is not None and message["type"] == "http.response.body":
                body.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                await _send_error(send, start, b"".join(body))
                return
            await send(message)

        await self.app(scope, receive, rewrite)


async def _send_error(send: Send, start: Message, raw: bytes) -> None:
    problem = orjson.loads(raw)
    status = 400 if start["status"] == 422 else start["status"]
    detail = problem.get("detail", "")
    if problem.get("errors"):  # where the request is wrong, as people read it
        detail += ": " + "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', []))}: {e.get('msg', '')}"
            for e in problem["errors"])
    payload = orjson.dumps(error_body(status, problem.get("code", "error"), detail))
    kept = [(k, v) for k, v in start.get("headers", [])
            if k not in (b"content-type", b"content-length")]
    await send({"type": "http.response.start", "status": status, "headers": [
        *kept, (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})

"""The edge every request passes first: ids for the logs, the key, the limits, the counts.

One plain ASGI class rather than a stack of middlewares: a step pays for it once. In order:
a request id (the caller's `X-Request-Id` when sane, else a new one, echoed back); the chat id
from the path, for the logs; the Bearer key (`/healthz` and `/readyz` need none; `/metrics` and
`/v1/status` need an admin key); the key's rate limit (429); the worker's cap on concurrent
steps (503); then the app, timed and counted, with one access line (no query string: the
context endpoint takes message text there). A WebSocket (`/ws/chat`) passes the same key check
and rate limit, its key also taken from a subprotocol (api/ws_protocol.py), and is refused with
an error frame and a close code.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import logs
from api.access import Access, Caller, Denied, RateLimiter, is_loopback
from api.metrics import Metrics
from api.problems import database_unavailable, problem_response
from api.ws_protocol import Mistake, authorization, close_code, refuse
from db.errors import is_outage

log = logging.getLogger("jin.access")

PUBLIC = frozenset({"/healthz", "/readyz"})
# The API's reference pages and what they load: a browser sends no key, and they show no data.
_REFERENCE = frozenset({"/docs", "/redoc", "/openapi.json"})
_REFERENCE_ASSETS = "/docs/assets/"
# The web page and its files: the page asks for the key itself, and holds no data.
_PAGE, _PAGE_ASSETS = "/", "/ui/"
ADMIN = frozenset({"/metrics", "/v1/status"})
_CHAT = re.compile(r"^/v1/chats/([0-9a-fA-F-]{36})(?:/|$)")
_STEP = re.compile(r"^/v1/chats/[^/]+/messages/?$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class Edge:
    def __init__(self, app: ASGIApp, *, metrics: Metrics, limiter: RateLimiter,
                 max_steps: int) -> None:
        self.app, self.metrics, self.limiter, self.max_steps = app, metrics, limiter, max_steps
        self.steps_in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._socket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = dict(scope["headers"])
        given = headers.get(b"x-request-id", b"").decode("latin-1")
        rid = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        logs.request_id.set(rid)
        path, method = scope["path"], scope["method"]
        chat = _CHAT.match(path)
        logs.chat_id.set(chat.group(1).lower() if chat else None)
        logs.step_id.set(None)
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"x-request-id", rid.encode())]}
            await send(message)

        is_step = method == "POST" and bool(_STEP.match(path))
        try:
            refusal = await self._refusal(scope, headers, path, is_step)
            if refusal is not None:
                await refusal(scope, receive, send_with_id)
                return
            if is_step:
                self.steps_in_flight += 1
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                if is_step:
                    self.steps_in_flight -= 1
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or ("unmatched" if status == 404 else path
                                                         if path in PUBLIC | ADMIN else "other")
            elapsed = time.perf_counter() - started
            label = method if method in _METHODS else "OTHER"  # the client picks the method
            self.metrics.requests.labels(label, template, str(status)).inc()
            self.metrics.request_seconds.labels(label, template).observe(elapsed)
            log.info("%s %s %d", method, template, status,
                     extra={"status": status, "ms": round(elapsed * 1000, 2)})

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        logs.request_id.set(uuid.uuid4().hex)
        logs.chat_id.set(None)
        logs.step_id.set(None)
        access: Access = scope["app"].state.access
        try:
            caller = await access.check(authorization(scope),
                                        local=_local(scope, dict(scope["headers"])))
        except Exception as exc:
            if not is_outage(exc):
                raise
            caller = Denied(503, "database_unavailable", "the database is not reachable")
        if isinstance(caller, Caller) and caller.key_id is not None:
            if self.limiter.take(caller.key_id) > 0:
                self.metrics.rate_limited.inc()
                caller = Denied(429, "rate_limited", "this key is over its rate limit")
        if isinstance(caller, Denied):
            if caller.status == 401:
                self.metrics.auth_failures.labels(caller.code).inc()
            await refuse(scope, receive, send, Mistake(caller.status, caller.code, caller.detail))
            status = close_code(caller.status)
        else:
            _remember(scope, caller)
            await self.app(scope, receive, send)
            status = 101
        log.info("WEBSOCKET %s %d", scope["path"], status,
                 extra={"status": status, "ms": round((time.perf_counter() - started) * 1000, 2)})

    async def _refusal(self, scope: Scope, headers: dict[bytes, bytes], path: str,
                       is_step: bool) -> JSONResponse | None:
        """The answer that turns the request away, or None to let it in."""
        if (path in PUBLIC or path in _REFERENCE or path.startswith(_REFERENCE_ASSETS)
                or path == _PAGE or path.startswith(_PAGE_ASSETS)):
            return None
        access: Access = scope["app"].state.access
        raw = headers.get(b"authorization")
        try:
            caller = await access.check(raw.decode("latin-1") if raw is not None else None,
                                        local=_local(scope, headers))
        except Exception as exc:  # outside the app's error handlers: answer here
            if not is_outage(exc):
                raise
            log.warning("key check: the database is unavailable (%s)", type(exc).__name__)
            return database_unavailable()
        if isinstance(caller, Denied):
            self.metrics.auth_failures.labels(caller.code).inc()
            return problem_response(caller.status, caller.code, caller.detail,
                                    headers={"WWW-Authenticate": 'Bearer realm="jin"'})
        if path in ADMIN and not caller.admin:
            self.metrics.auth_failures.labels("admin_only").inc()
            return problem_response(403, "admin_only", f"{path} needs an admin key")
        if caller.key_id is not None:
            wait = self.limiter.take(caller.key_id)
            if wait > 0:
                self.metrics.rate_limited.inc()
                return problem_response(
                    429, "rate_limited", "this key is over its rate limit; retry later",
                    headers={"Retry-After": RateLimiter.retry_after(wait)})
        # Steps whose client left still run (and save): count those too.
        running = max(self.steps_in_flight, len(scope["app"].state.runtime.running))
        if is_step and running >= self.max_steps:
            return problem_response(
                503, "too_many_steps", f"this worker runs {self.max_steps} steps already",
                headers={"Retry-After": "1"})
        _remember(scope, caller)
        return None


def _local(scope: Scope, headers: dict[bytes, bytes]) -> bool:
    """On loopback at both ends, and not forwarded by a proxy (which would make everyone
    behind it look local)."""
    client, server = scope.get("client"), scope.get("server")
    forwarded = any(h in headers for h in (b"forwarded", b"x-forwarded-for", b"x-real-ip"))
    return (not forwarded and client is not None and is_loopback(client[0])
            and (not server or is_loopback(server[0])))


def _remember(scope: Scope, caller: Caller) -> None:
    state = scope.setdefault("state", {})
    state["tenant"] = caller.tenant_id
    state["caller"] = caller


def declare_keys(app: FastAPI) -> None:
    """Tell the OpenAPI spec that every route but health takes a Bearer key (wrapping the spec
    that problems.install built, so its Problem schema stays)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        spec = generate()
        components = spec.setdefault("components", {})
        components.setdefault("securitySchemes", {})["apiKey"] = {
            "type": "http", "scheme": "bearer",
            "description": "`jin keys create`; not needed on loopback while no key exists",
        }
        spec["security"] = [{"apiKey": []}]
        for path in PUBLIC & set(spec.get("paths", {})):
            for operation in spec["paths"][path].values():
                operation["security"] = []
        return spec

    app.openapi = openapi  # type: ignore[method-assign]

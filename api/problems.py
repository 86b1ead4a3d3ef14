"""Errors outside a stream, as `application/problem+json` (RFC 9457) with a stable `code`.

`install(app)` turns every error into one, and puts the `Problem` schema into the OpenAPI
document; routes declare which of them they can give with `responses(...)`.
"""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from db.errors import StoreUnavailable, is_outage
from orchestrator.errors import StepError

log = logging.getLogger("jin.api")

PROBLEM_TYPE = "application/problem+json"

_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "request_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}

_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")

# When each status is given; the `code` in the body says which case it is.
_WHEN = {
    400: "The body cannot be read as JSON (not UTF-8, for one)",
    401: "No API key, or one that is unknown or revoked (only once keys exist)",
    403: "The key may not use this route",
    404: "No such resource for this tenant",
    409: "Another step holds the chat and its busy policy refuses to wait, or the wait ran out",
    413: "The body or the message is over the deployment's limit",
    422: "The request does not match the schema (`errors` lists where)",
    429: "The key is over its rate limit (see Retry-After)",
    503: "A dependency is down or the worker is full: database, memory, embedder (Retry-After)",
}

PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "An RFC 9457 problem document; `code` is stable, `detail` is for people.",
    "type": "object",
    "required": ["type", "title", "status", "code", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "code": {"type": "string"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["loc", "msg", "type"],
                "properties": {
                    "loc": {"type": "array", "items": {"type": ["string", "integer"]}},
                    "msg": {"type": "string"},
                    "type": {"type": "string"},
                },
            },
        },
    },
}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` of the given statuses, each a problem document."""
    ref = {"$ref": "#/components/schemas/Problem"}
    return {
        status: {"description": _WHEN[status], "content": {PROBLEM_TYPE: {"schema": ref}}}
        for status in statuses
    }


class Problem(Exception):
    """Raise from a route to answer with a problem document."""

    def __init__(self, status: int, code: str, detail: str, *,
                 headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail, self.extra = status, code, detail, extra
        self.headers = headers


def problem_response(
    status: int, code: str, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = {
        "type": f"https://jin.dev/problems/{code}",
        "title": code.replace("_", " ").capitalize(),
        "status": status,
        "code": code,
        "detail": detail,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_TYPE, headers=headers)


def _with_problem_schema(app: FastAPI) -> None:
    """Add the `Problem` schema that `responses(...)` refers to (FastAPI would file a model
    given there under application/json, not application/problem+json)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        spec = generate()
        spec.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def install(app: FastAPI) -> None:
    _with_problem_schema(app)

    @app.exception_handler(Problem)
    async def _problem(_: Request, exc: Problem) -> JSONResponse:
        # A 503 is "not now": say when to come back (an embedder or database blip).
        headers = exc.headers or ({"Retry-After": "5"} if exc.status == 503 else None)
        return problem_response(exc.status, exc.code, exc.detail, headers, **exc.extra)

    @app.exception_handler(StepError)
    async def _step_error(_: Request, exc: StepError) -> JSONResponse:
        return problem_response(exc.status, exc.code, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return problem_response(422, "invalid_request", "the request is not valid", errors=errors)

    @app.exception_handler(StoreUnavailable)
    async def _unavailable(_: Request, exc: StoreUnavailable) -> JSONResponse:
        log.warning("database unavailable: %s", type(exc.__cause__).__name__)
        return database_unavailable()

    # What SQL outside the stores raises (api/keys.py runs its own): SQLAlchemy's error, or the
    # driver's.
    @app.exception_handler(DBAPIError)
    async def _database(_: Request, exc: DBAPIError) -> JSONResponse:
        return _database_problem(exc, exc.orig)

    @app.exception_handler(asyncpg.InterfaceError)
    @app.exception_handler(asyncpg.exceptions.InternalClientError)
    @app.exception_handler(asyncpg.PostgresError)
    async def _driver(_: Request, exc: Exception) -> JSONResponse:
        # asyncpg's own error: SQLAlchemy wraps what statements raise, not what the hooks that
        # set up a new connection do (the JSON codecs, pgvector's type).
        return _database_problem(exc, exc)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", exc_info=exc)
        return problem_response(500, "internal_error", "the server failed to handle this request")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _CODES.get(exc.status_code, "http_error")
        headers = dict(exc.headers) if exc.headers else None
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": _allowed(request)}
        return problem_response(exc.status_code, code, str(exc.detail), headers=headers)


def database_unavailable() -> JSONResponse:
    return problem_response(503, "database_unavailable",
                            "the database is not reachable; retry shortly",
                            headers={"Retry-After": "2"})


def _database_problem(exc: BaseException, cause: BaseException | None) -> JSONResponse:
    """503 while the database is away (db/errors.py), else 500; `cause` the driver's error."""
    if is_outage(exc):
        log.warning("database unavailable: %s", type(cause).__name__)
        return database_unavailable()
    log.error("database error", exc_info=exc)
    return problem_response(500, "internal_error", "the server failed to handle this request")


def _allowed(request: Request) -> str:
    """Every method of the path. Starlette's own 405 names only the first route that matched
    the path (`GET /v1/chats` hid `POST /v1/chats`). Each method is tried through the routes'
    public `matches`, since included routers nest their routes."""
    routes = request.app.router.routes
    return ", ".join(
        method for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL
               for route in routes)
    )

"""Errors outside a stream, as `application/problem+json` (RFC 9457) with a stable `code`."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

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


class Problem(Exception):
    """Raise from a route to answer with a problem document."""

    def __init__(self, status: int, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail, self.extra = status, code, detail, extra


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


# SQLSTATE classes that mean "not now" rather than "wrong": connection exceptions, insufficient
# resources (too many clients), and the server shutting down or starting.
_UNAVAILABLE = ("08", "53", "57P")


def _unavailable(exc: DBAPIError) -> bool:
    state = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None) or ""
    return isinstance(state, str) and state.startswith(_UNAVAILABLE)


def install(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(_: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc.status, exc.code, exc.detail, **exc.extra)

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

    @app.exception_handler(DBAPIError)
    async def _database(_: Request, exc: DBAPIError) -> JSONResponse:
        if exc.connection_invalidated or isinstance(exc.orig, OSError | ConnectionError) or (
            isinstance(exc, OperationalError | InterfaceError) or _unavailable(exc)
        ):
            log.warning("database unavailable: %s", type(exc.orig).__name__)
            return problem_response(
                503, "database_unavailable", "the database is not reachable; retry shortly",
                headers={"Retry-After": "2"},
            )
        log.error("database error", exc_info=exc)
        return problem_response(500, "internal_error", "the server failed to handle this request")

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error", exc_info=exc)
        return problem_response(500, "internal_error", "the server failed to handle this request")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _CODES.get(exc.status_code, "http_error")
        return problem_response(exc.status_code, code, str(exc.detail), headers=exc.headers)

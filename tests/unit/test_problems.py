"""The database's errors as problems, over real HTTP: away is 503 with Retry-After, else 500.
Away is what a store raises (StoreUnavailable), or the driver's own error where SQL runs outside
the stores."""

from __future__ import annotations

from collections.abc import Iterator

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from api.problems import install
from db.errors import StoreUnavailable
from llm.testing import serve_in_thread, stop_thread_server

_RAISED = {
    # What a new connection's setup hooks raise as asyncpg raised it when the server goes away.
    "closed": asyncpg.InterfaceError("connection is closed"),
    "terminated": asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of "
                                                      "operation"),
    "shutting_down": asyncpg.CannotConnectNowError("the database system is shutting down"),
    # A pooled connection whose server went away while it sat idle, stuck in its protocol.
    "stuck": asyncpg.exceptions.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"),
    "bad_sql": asyncpg.PostgresSyntaxError("syntax error at or near \"SELEC\""),
}


@pytest.fixture
def url() -> Iterator[str]:
    app = FastAPI()
    install(app)

    @app.get("/raise/{name}")
    async def _raise(name: str) -> None:
        raise _RAISED[name]

    @app.get("/store_unavailable")
    async def _store() -> None:
        raise StoreUnavailable("the database is unavailable") from _RAISED["terminated"]

    server, thread, port = serve_in_thread(app)
    yield f"http://127.0.0.1:{port}"
    stop_thread_server(server, thread)


@pytest.mark.parametrize("path", [
    "/store_unavailable", *(f"/raise/{name}" for name in ("closed", "terminated",
                                                          "shutting_down", "stuck"))])
def test_the_database_away_is_a_503_to_retry(url: str, path: str) -> None:
    response = httpx.get(f"{url}{path}")
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "database_unavailable"
    assert response.headers["retry-after"] == "2"


def test_a_driver_error_of_another_kind_stays_a_500(url: str) -> None:
    response = httpx.get(f"{url}/raise/bad_sql")
    assert response.status_code == 500
    assert response.json()["code"] == "internal_error"

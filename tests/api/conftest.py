"""The running app: a real uvicorn in a thread, against a real database and the fake model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from api.app import create_app
from api.settings import Settings
from llm.testing import serve_in_thread, stop_thread_server


@pytest.fixture
def jin_factory(
    database_url: str, model_url: str, helper_url: str
) -> Iterator[Callable[..., str]]:
    started: list[tuple[Any, Any]] = []

    def start(**overrides: Any) -> str:
        values: dict[str, Any] = {
            "database_url": database_url,
            "brain_url": model_url,
            "brain_model": "fake",
            "helper_url": helper_url,
            "helper_model": "fake",
            # The fake's bag-of-words vectors: texts that share words are close. Tests of
            # meaning use the built-in MiniLM instead (embedder_url=None).
            "embedder_url": model_url,
            "embedder_model": "fake-embedder",
            "abort_poll_seconds": 0.05,
            **overrides,
        }
        server, thread, port = serve_in_thread(create_app(Settings(**values)))
        started.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in started:
        stop_thread_server(server, thread)


@pytest.fixture
def jin(jin_factory: Callable[..., str]) -> str:
    return jin_factory()


@pytest.fixture
async def client(jin: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=jin, timeout=30) as c:
        yield c

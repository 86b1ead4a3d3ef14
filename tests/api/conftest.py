"""The running app: a real uvicorn in a thread, or real `jin serve` processes, against a real
database and the fake model."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.app import create_app
from api.settings import Settings
from llm.testing import serve_in_thread, stop_thread_server
from tests.api.processes import JinProcess, start_jin


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
            # L1 runtime memory calls the helper after every turn: on where a test asks for it
            # (tests/api/test_runtime_memory.py), so the other tests' helper scripts stay theirs.
            "runtime_memory": False,
            # L2 likewise (it needs L1): on in tests/api/test_runtime_patterns.py.
            "l2_enabled": False,
            # Event extraction calls the helper after turns too: on where a test asks for it
            # (tests/api/test_events.py), for the same reason.
            "events_enabled": False,
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


@pytest.fixture
def jin_processes(tmp_path: Path) -> Iterator[Callable[..., JinProcess]]:
    """Start `jin serve` processes with the given environment; all are stopped at the end."""
    started: list[JinProcess] = []
    numbers = itertools.count(1)

    def start(**env: str) -> JinProcess:
        started.append(start_jin(env, tmp_path / f"jin-{next(numbers)}.log"))
        return started[-1]

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def workers(
    jin_processes: Callable[..., JinProcess], database_url: str, model_url: str
) -> Callable[..., JinProcess]:
    """`jin serve` workers on this test's database, every model role on the fake server."""

    def start(**extra: str) -> JinProcess:
        return jin_processes(**{
            "DATABASE_URL": database_url,
            "JIN_BRAIN_URL": model_url,
            "JIN_HELPER_URL": model_url,
            "JIN_EMBEDDER_URL": model_url,
            "JIN_EMBEDDER_MODEL": "fake-embedder",
            "JIN_ABORT_POLL_SECONDS": "0.1",
            "JIN_RUNTIME_MEMORY": "false",  # (its helper is the brain's fake: see jin_factory)
            "JIN_EVENTS_ENABLED": "false",
            **extra,
        })

    return start

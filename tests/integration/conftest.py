"""Fixtures of the memory tests: the built-in embedder, an empty database."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import AsyncEngine

from llm.e5_embedder import E5Embedder
from llm.onnx_embedder import OnnxMiniLM


@pytest.fixture(scope="session")
def minilm() -> OnnxMiniLM:
    return OnnxMiniLM()


@pytest.fixture(scope="session")
def e5() -> E5Embedder:
    return E5Embedder()  # the default built-in embedder


@pytest.fixture
async def empty_url(engine: AsyncEngine, database_url: str) -> AsyncIterator[str]:
    """A database with no schema at all, on the test's server."""
    name = f"jin_upgrade_{uuid.uuid4().hex[:12]}"
    admin = engine.execution_options(isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f"CREATE DATABASE {name}"))
    yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
    async with admin.connect() as conn:
        await conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))

"""Fixtures of the memory tests: the memory engine and the built-in embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import create_memory_engine
from llm.onnx_embedder import OnnxMiniLM


@pytest.fixture(scope="session")
def minilm() -> OnnxMiniLM:
    return OnnxMiniLM()


@pytest.fixture
async def memory_db(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_memory_engine(database_url, pool_size=2)
    yield engine
    await engine.dispose()

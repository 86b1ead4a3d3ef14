"""Indexing, recall and reindexing against real Postgres and real embedders."""

from __future__ import annotations

import asyncio
import io
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import create_memory_engine
from api.reindex import reindex
from api.settings import Settings
from chat.ports import ImportedMessage, NewChat
from chat.store import PostgresChatStore
from chat.types import ModelSettings
from llm.onnx_embedder import OnnxMiniLM
from llm.testing import FakeOpenAIServer
from memory.indexer import Indexer, IndexerConfig
from memory.recall import RecallConfig
from memory.search import PostgresRecall
from memory.store import PostgresFactStore

T0 = datetime(2026, 10, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLM:
    return OnnxMiniLM()


@pytest.fixture
async def memory_db(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_memory_engine(database_url, pool_size=2)
    yield engine
    await engine.dispose()


@pytest.fixture
def small_embedder() -> Iterator[tuple[FakeOpenAIServer, str]]:
    server = FakeOpenAIServer(embed_dim=16)
    yield server, server.start()
    server.stop()


async def _chat_with(engine: AsyncEngine, user: str, lines: list[str]) -> list[uuid.UUID]:
    chats = PostgresChatStore(engine)
    chat = await chats.create_chat(NewChat("t", user, "", "", ModelSettings(), "queue"))
    rows = [ImportedMessage("user" if i % 2 == 0 else "assistant", line, 10,
                            T0 + timedelta(minutes=i)) for i, line in enumerate(lines)]
    ids = await chats.import_messages("t", chat.id, rows)
    assert ids is not None
    return ids


async def _count(engine: AsyncEngine, sql: str) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text(sql))).scalar() or 0)


async def test_imported_messages_are_indexed_in_batches_and_recalled_per_user(
    engine: AsyncEngine, memory_db: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    mine = await _chat_with(engine, "ana", [
        "My daughter's school play is on Friday at six",
        "Break a leg to her!",
        "Моя сестра живёт в Казани и работает врачом",
        "Здорово!",
        "Мій брат переїхав до Одеси минулого року",
        "Чудово.",
    ])
    await _chat_with(engine, "ben", ["Ben's daughter has a school play on Friday too"])
    indexer = Indexer(memory_db, minilm, minilm.name, IndexerConfig(batch_size=4))
    assert await indexer.drain_once() == 4  # a batch at a time
    assert await indexer.index_chat(uuid.uuid4()) == 0  # another chat's queue: nothing
    while await indexer.drain_once():
        pass
    assert await _count(engine, "SELECT count(*) FROM recall_queue") == 0
    assert await _count(engine, "SELECT count(*) FROM message_embeddings") == 7

    recall = PostgresRecall(memory_db, minilm, lambda s: len(s.split()), RecallConfig())

    async def top(query: str, mode: str = "hybrid", exclude: list[uuid.UUID] | None = None
                  ) -> list[str]:
        cfg = RecallConfig(mode=mode)  # type: ignore[arg-type]
        result = await recall.recall("t", "ana", query, config=cfg, exclude=exclude)
        return [i.text for i in result.items]

    assert (await top("when is the school performance?", "dense"))[0].startswith("My daughter")
    assert "Ben's daughter" not in " ".join(await top("daughter school play"))
    # Russian: the stemmer matches inflected forms; Ukrainian: a prefix catches the case.
    assert (await top("где работают сёстры", "keyword"))[0].startswith("Моя сестра")
    assert (await top("Одеса", "keyword"))[0].startswith("Мій брат")
    assert "My daughter" not in " ".join(await top("school play", exclude=mine[:1]))


async def test_reindex_moves_to_a_model_of_another_size_and_resumes_where_it_stopped(
    engine: AsyncEngine, memory_db: AsyncEngine, minilm: OnnxMiniLM, database_url: str,
    small_embedder: tuple[FakeOpenAIServer, str],
) -> None:
    await _chat_with(engine, "ana", [f"message number {i} about topic {i % 3}" for i in range(12)])
    await Indexer(memory_db, minilm, minilm.name).index_chat(
        (await PostgresChatStore(engine).list_chats("t", "ana", None, 1))[0].id)
    facts = PostgresFactStore(memory_db, minilm, minilm.name)
    await facts.remember("t", "ana", ["Ana prefers window seats"], [])

    server, url = small_embedder
    settings = Settings(database_url=database_url, embedder_url=url, embedder_model="tiny-16",
                        embedding_dim=16, indexer_batch_size=3, indexer_claim_seconds=0.5)
    first = asyncio.create_task(reindex(settings, database_url, out=io.StringIO()))
    for _ in range(1000):  # until the first batch is written (polling the database)
        if await _count(engine, "SELECT count(*) FROM message_embeddings "
                                "WHERE embedder = 'tiny-16'") >= 3:
            break
        await asyncio.sleep(0.01)
    first.cancel()  # stopped half-way, like a ctrl-C
    await asyncio.gather(first, return_exceptions=True)
    left = await _count(engine, "SELECT count(*) FROM recall_queue")
    assert 0 < left < 12

    out = io.StringIO()
    done = await reindex(settings, database_url, out=out)
    assert done["messages"] == left and done["dim"] == 16  # only what was left
    assert await _count(engine, "SELECT count(*) FROM recall_queue") == 0
    assert await _count(engine, "SELECT count(*) FROM message_embeddings "
                               "WHERE embedder = 'tiny-16' AND vector_dims(embedding) = 16") == 12
    assert await _count(engine, "SELECT count(*) FROM memories WHERE embedder = 'tiny-16'") == 1
    assert f"messages: {left}/{left} (100%)" in out.getvalue()
    again = await reindex(settings, database_url, out=io.StringIO())
    assert again["messages"] == 0 and again["facts"] == 0

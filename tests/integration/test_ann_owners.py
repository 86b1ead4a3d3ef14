"""Which users' message vectors go into the HNSW index (migration 0008), on real Postgres: a
user joins it at the threshold with every earlier row, recall finds a user's rows in either
state, and an upgrade keeps the users of before in the index."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import numpy as np
import pytest
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import create_engine, downgrade, migrate
from llm.onnx_embedder import OnnxMiniLM
from memory.indexer import Indexer, IndexerConfig
from memory.recall import RecallConfig
from memory.search import PostgresRecall
from tests.integration.history import import_chat

ANA = [
    "The spare key is under the blue flower pot",
    "Noted, the blue pot.",
    "My flight to Lisbon leaves at seven on Tuesday",
    "Have a good trip!",
    "The wifi password is on the fridge door",
    "Got it.",
]


async def _rows(engine: AsyncEngine, sql: str) -> list[tuple]:
    async with engine.connect() as conn:
        return [tuple(row) for row in await conn.execute(text(sql))]


async def test_a_user_joins_the_index_at_the_threshold_and_is_recalled_before_and_after(
    engine: AsyncEngine, memory_db: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    await import_chat(engine, "t", "ana", ANA)
    await import_chat(engine, "t", "ben", ["Ben keeps his spare key at the office"])
    indexer = Indexer(memory_db, minilm, minilm.name, IndexerConfig(batch_size=2, ann_from=5))
    recall = PostgresRecall(memory_db, minilm, lambda s: len(s.split()), RecallConfig())

    async def first(query: str) -> str:
        result = await recall.recall("t", "ana", query, config=RecallConfig(mode="dense"))
        return result.items[0].text

    await indexer.drain_once()
    await indexer.drain_once()  # ana's first four rows (live ones queue in time order)
    assert await _rows(engine, "SELECT user_id, messages, ann FROM recall_owners "
                               "WHERE user_id = 'ana'") == [("ana", 4, False)]
    assert await _rows(engine, "SELECT DISTINCT ann FROM message_embeddings") == [(False,)]
    assert (await first("where is the spare key?")).startswith("The spare key")

    while await indexer.drain_once():
        pass
    # Ana's fifth row crossed the threshold: all of her rows are in the index now, Ben's not.
    assert await _rows(engine, "SELECT user_id, messages, ann FROM recall_owners "
                               "ORDER BY user_id") == [("ana", 6, True), ("ben", 1, False)]
    assert await _rows(engine, "SELECT user_id, bool_and(ann), count(*) FROM message_embeddings "
                               "GROUP BY 1 ORDER BY 1") == [("ana", True, 6), ("ben", False, 1)]
    assert (await first("where is the spare key?")).startswith("The spare key")
    assert (await first("when do I fly to Portugal?")).startswith("My flight")
    ben = await recall.recall("t", "ben", "spare key", config=RecallConfig(mode="dense"))
    assert [i.text for i in ben.items] == ["Ben keeps his spare key at the office"]

    # A row that an older worker wrote outside the index (during a rolling upgrade) is found
    # all the same, by a worker that knows Ana's rows are indexed and by one that does not.
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE message_embeddings SET ann = false "
                                "WHERE content_tsv @@ to_tsquery('jin_search', 'wifi')"))
    assert (await first("what's the wifi password")).startswith("The wifi password")
    recall = PostgresRecall(memory_db, minilm, lambda s: len(s.split()), RecallConfig())
    assert (await first("what's the wifi password")).startswith("The wifi password")


async def test_a_user_who_grows_past_the_threshold_is_recalled_by_a_worker_that_knew_them_small(
    engine: AsyncEngine, memory_db: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    chat_id, _ = await import_chat(engine, "t", "ana", ANA[:2])
    indexer = Indexer(memory_db, minilm, minilm.name, IndexerConfig(ann_from=3))
    await indexer.index_chat(chat_id)
    recall = PostgresRecall(memory_db, minilm, lambda s: len(s.split()), RecallConfig())
    dense = RecallConfig(mode="dense")
    assert (await recall.recall("t", "ana", "spare key", config=dense)).items  # seen small
    await import_chat(engine, "t", "ana", ANA[2:])  # another chat of hers
    while await indexer.drain_once():
        pass
    assert await _rows(engine, "SELECT ann FROM recall_owners") == [(True,)]
    assert await _rows(engine, "SELECT DISTINCT ann FROM message_embeddings") == [(True,)]
    for query, found in (("when do I fly to Portugal?", "My flight"),
                         ("where is the spare key?", "The spare key")):
        result = await recall.recall("t", "ana", query, config=dense)
        assert result.items[0].text.startswith(found)


@pytest.fixture
async def empty_url(engine: AsyncEngine, database_url: str) -> AsyncIterator[str]:
    name = f"jin_upgrade_{uuid.uuid4().hex[:12]}"
    admin = engine.execution_options(isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f"CREATE DATABASE {name}"))
    yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
    async with admin.connect() as conn:
        await conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


async def test_upgrading_to_0008_keeps_the_users_of_before_in_the_index(empty_url: str) -> None:
    await asyncio.to_thread(migrate, empty_url, "0007")
    chat, message = uuid.uuid4(), uuid.uuid4()
    vector = "[" + ",".join(map(str, np.eye(384)[0])) + "]"
    db = create_engine(empty_url, pool_size=1)
    try:
        async with db.begin() as conn:
            await conn.execute(text(
                "INSERT INTO chats (id, tenant_id, user_id) VALUES (:chat, 't', 'ana')"),
                {"chat": chat})
            await conn.execute(text(
                "INSERT INTO messages (id, chat_id, position, kind, content, status) "
                "VALUES (:m, :chat, 1, 'user', 'Where did I park?', 'complete')"),
                {"m": message, "chat": chat})
            await conn.execute(text(
                "INSERT INTO message_embeddings (message_id, chat_id, tenant_id, user_id, "
                "embedding, content_tsv, embedder) VALUES (:m, :chat, 't', 'ana', "
                "CAST(:v AS vector), to_tsvector('park'), 'e')"),
                {"m": message, "chat": chat, "v": vector})
        await asyncio.to_thread(migrate, empty_url)
        assert await _rows(db, "SELECT ann FROM message_embeddings") == [(True,)]
        assert await _rows(db, "SELECT user_id, messages, ann FROM recall_owners") == [
            ("ana", 1, True)]
        [(index,)] = await _rows(db, "SELECT indexdef FROM pg_indexes "
                                     "WHERE indexname = 'message_embeddings_hnsw'")
        assert "hnsw" in index and index.endswith("WHERE ann")

        await asyncio.to_thread(downgrade, empty_url, "0007")
        [(index,)] = await _rows(db, "SELECT indexdef FROM pg_indexes "
                                     "WHERE indexname = 'message_embeddings_hnsw'")
        assert "hnsw" in index and "WHERE" not in index
        assert await _rows(db, "SELECT count(*) FROM message_embeddings") == [(1,)]
    finally:
        await db.dispose()

"""Which users' vectors go into the HNSW indexes (migration 0008), on real Postgres: a user joins
them at the threshold, of messages or of facts, with every earlier row; recall and the fact
store's duplicate checks find a user's rows in either state; recall's statement for any user is
planned for that user, the small users' form once a connection; an upgrade keeps the users of
before in the indexes."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import numpy as np
from pgvector import Vector
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import downgrade, migrate
from chat.types import POSITION_GAP
from db.engine import create_engine
from db.statements import connect, fetch, positional
from llm.onnx_embedder import OnnxMiniLM
from memory.hnsw_membership import ANN_FROM, count_written
from memory.indexer import Indexer, IndexerConfig
from memory.ranking import RecallConfig, RecallQuery
from memory.recall_store import _FOR_ANY_USER, PostgresRecall, for_small_users
from memory.store import FactConfig, PostgresFactStore
from tests.integration.history import T0, import_chat

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
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    await import_chat(engine, "t", "ana", ANA)
    await import_chat(engine, "t", "ben", ["Ben keeps his spare key at the office"])
    indexer = Indexer(engine, minilm, minilm.name, IndexerConfig(batch_size=2, ann_from=5))
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())

    async def first(query: str) -> str:
        result = await recall.recall(RecallQuery("t", "ana", query), RecallConfig(mode="dense"))
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
    ben = await recall.recall(RecallQuery("t", "ben", "spare key"), RecallConfig(mode="dense"))
    assert [i.text for i in ben.items] == ["Ben keeps his spare key at the office"]

    # A row that an older worker wrote outside the index (during a rolling upgrade) is found
    # all the same, by a worker that knows Ana's rows are indexed and by one that does not.
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE message_embeddings SET ann = false "
                                "WHERE content_tsv @@ to_tsquery('jin_search', 'wifi')"))
    assert (await first("what's the wifi password")).startswith("The wifi password")
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())
    assert (await first("what's the wifi password")).startswith("The wifi password")


async def test_a_user_who_grows_past_the_threshold_is_recalled_by_a_worker_that_knew_them_small(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    chat_id, _ = await import_chat(engine, "t", "ana", ANA[:2])
    indexer = Indexer(engine, minilm, minilm.name, IndexerConfig(ann_from=3))
    await indexer.index_chat(chat_id)
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())
    dense = RecallConfig(mode="dense")
    assert (await recall.recall(RecallQuery("t", "ana", "spare key"), dense)).items  # seen small
    await import_chat(engine, "t", "ana", ANA[2:])  # another chat of hers
    while await indexer.drain_once():
        pass
    assert await _rows(engine, "SELECT ann FROM recall_owners") == [(True,)]
    assert await _rows(engine, "SELECT DISTINCT ann FROM message_embeddings") == [(True,)]
    for query, found in (("when do I fly to Portugal?", "My flight"),
                         ("where is the spare key?", "The spare key")):
        result = await recall.recall(RecallQuery("t", "ana", query), dense)
        assert result.items[0].text.startswith(found)


async def test_a_user_joins_the_indexes_by_facts_and_duplicates_are_still_caught(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    chat_id, _ = await import_chat(engine, "t", "ana", ANA[:2])
    await Indexer(engine, minilm, minilm.name).index_chat(chat_id)  # far below 1,000
    facts = PostgresFactStore(engine, minilm, minilm.name, FactConfig(ann_from=3))
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())

    async def first(query: str) -> str:
        result = await recall.recall(RecallQuery("t", "ana", query), RecallConfig(mode="dense"))
        return result.items[0].text

    await facts.remember("t", "ana", ["Ana's favourite colour is green."], [])
    await facts.remember("t", "ana", ["Ana's favourite colour is green."], [])  # the same
    assert await _rows(engine, "SELECT facts, ann FROM recall_owners") == [(1, False)]
    assert (await first("which colour does Ana like?")).startswith("Ana's favourite colour")
    await facts.remember("t", "ana", ["Ana works at a bakery in Lviv.",
                                      "Ana's cat is called Pixel."], [])
    # The third fact crossed the threshold: her facts and her messages are in the indexes.
    assert await _rows(engine, "SELECT facts, ann FROM recall_owners") == [(3, True)]
    assert await _rows(engine, "SELECT DISTINCT ann FROM memories") == [(True,)]
    assert await _rows(engine, "SELECT DISTINCT ann FROM message_embeddings") == [(True,)]
    assert (await first("what is the name of Ana's cat?")).startswith("Ana's cat")
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())
    assert (await first("what is the name of Ana's cat?")).startswith("Ana's cat")  # anew
    found = await recall.recall(RecallQuery("t", "ana", "where is the spare key?"),
                                RecallConfig(mode="dense"))
    assert any(i.text.startswith("The spare key") for i in found.items)  # a message
    # A paraphrase still supersedes and the same text still updates, through the index now.
    [paraphrase] = await facts.write("t", "ana", ["Ana's favourite colour is green!"], [],
                                     origin="tool")
    [same] = await facts.write("t", "ana", ["Ana works at a bakery in Lviv."], [],
                               origin="tool")
    assert (paraphrase.action, same.action) == ("superseded", "updated")
    assert await _rows(engine, "SELECT count(*) FILTER (WHERE valid_to IS NULL), bool_and(ann) "
                               "FROM memories") == [(3, True)]


async def test_rows_a_writer_left_outside_after_the_user_joined_are_brought_in(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    # A writer read Ana's state just before she joined the index: its rows went in outside it,
    # and its count, coming after her joining, finds her in and brings them in.
    chat_id, _ = await import_chat(engine, "t", "ana", ANA)
    await Indexer(engine, minilm, minilm.name).index_chat(chat_id)
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE recall_owners SET ann = true"))
    assert await _rows(engine, "SELECT DISTINCT ann FROM message_embeddings") == [(False,)]
    async with connect(engine) as conn:
        await count_written(conn, "messages", [(("t", "ana"), False)], ann_from=1000)
    assert await _rows(engine, "SELECT DISTINCT ann FROM message_embeddings") == [(True,)]
    assert await _rows(engine, "SELECT messages FROM recall_owners") == [(7,)]


async def test_a_small_users_recall_with_one_plan_finds_what_the_form_for_anyone_finds(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    chat_id, ids = await import_chat(engine, "t", "ana", ANA)
    await import_chat(engine, "t", "ben", ["Ben's spare key is at the office"])
    indexer = Indexer(engine, minilm, minilm.name)
    while await indexer.drain_once():
        pass
    await PostgresFactStore(engine, minilm, minilm.name).remember(
        "t", "ana", ["Ana's spare key hides under the blue pot.", "Ana flies on Tuesdays."], [])
    known = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())
    await known.recall(RecallQuery("t", "ana", "hello"))  # from now on it knows Ana is small
    for mode in ("hybrid", "dense", "keyword"):
        cfg = RecallConfig(mode=mode)  # type: ignore[arg-type]
        for query, kwargs in (
            ("where is the spare key", {}),
            ("spare key flight Tuesday wifi", {"exclude": tuple(ids[:1])}),
            ("blue pot", {"shown_from": (chat_id, 2 * POSITION_GAP, T0)}),
            ("password fridge", {"hide": (chat_id, T0 + timedelta(minutes=3))}),
        ):
            anyone = PostgresRecall(engine, minilm, lambda s: len(s.split()), cfg)
            want = await anyone.recall(RecallQuery("t", "ana", query, now=T0, **kwargs), cfg)
            got = await known.recall(RecallQuery("t", "ana", query, now=T0, **kwargs), cfg)
            assert [i.text for i in got.items] == [i.text for i in want.items], (mode, query)
            assert got.items, (mode, query)


async def test_recall_for_any_user_is_planned_for_the_user_and_for_a_small_one_once(
    engine: AsyncEngine, minilm: OnnxMiniLM, database_url: str
) -> None:
    # Connections make one generic plan of a statement (db/engine.py); recall's statement for any
    # user must be planned for its user, or a user of a million rows gets a small user's plan
    # (bench/README.md, recall at scale). Postgres counts the plans of each prepared statement.
    chat_id, _ = await import_chat(engine, "t", "ana", ANA)
    await Indexer(engine, minilm, minilm.name).index_chat(chat_id)
    alone = create_engine(database_url, pool_size=1)  # used by one call at a time: one connection
    try:
        # (Events off: their statement runs beside this one, on a second connection.)
        recall = PostgresRecall(alone, minilm, lambda s: len(s.split()),
                                RecallConfig(events=False))
        for _ in range(3):  # not known yet, then known to be small
            assert (await recall.recall(RecallQuery("t", "ana", "where is the spare key?"))).items
        async with connect(alone) as conn:
            plans = {row["statement"]: (row["generic_plans"], row["custom_plans"])
                     for row in await fetch(conn, text(
                         "SELECT statement, generic_plans, custom_plans "
                         "FROM pg_prepared_statements"), {})}
        cfg = RecallConfig()
        small = for_small_users(cfg.candidates, cfg.keyword_scan, ANN_FROM)
        assert plans[positional(_FOR_ANY_USER.text)[0]] == (0, 1)
        assert plans[positional(small.text)[0]] == (2, 0)
    finally:
        await alone.dispose()


async def test_upgrading_to_0008_keeps_the_users_of_before_in_the_index(empty_url: str) -> None:
    await asyncio.to_thread(migrate, empty_url, "0007")
    chat, message = uuid.uuid4(), uuid.uuid4()
    vector = Vector(np.eye(384, dtype=np.float32)[0])
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
            for user in ("ana", "ben"):  # Ben has facts and no messages
                await conn.execute(text(
                    "INSERT INTO memories (id, tenant_id, user_id, text, normalized, embedding) "
                    "VALUES (gen_random_uuid(), 't', :u, 'Likes tea.', 'likes tea', "
                    "CAST(:v AS vector))"), {"u": user, "v": vector})
        await asyncio.to_thread(migrate, empty_url)
        assert await _rows(db, "SELECT ann FROM message_embeddings") == [(True,)]
        assert await _rows(db, "SELECT DISTINCT ann FROM memories") == [(True,)]
        assert await _rows(db, "SELECT user_id, messages, facts, ann FROM recall_owners "
                               "ORDER BY user_id") == [("ana", 1, 1, True), ("ben", 0, 1, True)]
        indexes = ("SELECT indexdef FROM pg_indexes WHERE indexname LIKE '%\\_hnsw' "
                   "AND tablename IN ('message_embeddings', 'memories') ORDER BY 1")  # (recall's)
        definitions = [row[0] for row in await _rows(db, indexes)]
        assert len(definitions) == 2
        assert all("hnsw" in d and d.endswith("WHERE ann") for d in definitions)

        await asyncio.to_thread(downgrade, empty_url, "0007")
        definitions = [row[0] for row in await _rows(db, indexes)]
        assert len(definitions) == 2 and all("WHERE" not in d for d in definitions)
        assert await _rows(db, "SELECT count(*) FROM memories") == [(2,)]
    finally:
        await db.dispose()

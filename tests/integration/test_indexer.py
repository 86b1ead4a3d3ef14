"""The recall queue against real Postgres and a real HTTP embedder: poisoned messages, provider
failures, live before backfill, and compaction's wait for what other workers hold."""

from __future__ import annotations

import asyncio
import io
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.reindex import reindex
from api.settings import Settings
from chat.ports import FinishedStep, Opened, OpenStep
from chat.steps import PostgresStepStore
from chat.store import PostgresChatStore
from db.statements import positional
from llm.embeddings import OpenAIEmbedder
from llm.errors import ProviderHTTPError
from llm.provider import Provider
from llm.testing import FakeOpenAIServer
from llm.types import HTTPConfig, ProviderConfig
from memory.indexer import _CHAT_QUEUE, _CLAIM, _CLAIM_CHAT, Indexer, IndexerConfig
from tests.backends import until_waiting
from tests.integration.history import import_chat, out_of_line

POISON = "\u2620POISON\u2620"  # the fake embedder answers 400 to a batch holding this
MODEL = "fake-384"  # the test database holds 384-dimensional vectors, the fake's default


@pytest.fixture
def embedder_server() -> Iterator[tuple[FakeOpenAIServer, str]]:
    server = FakeOpenAIServer(embed_reject=POISON)
    yield server, server.start()
    server.stop()


Servers = Callable[[str], Provider]


@pytest.fixture
async def http() -> AsyncIterator[Servers]:
    """Embedder servers by base URL, each with its own client, closed after the test."""
    made: list[Provider] = []

    def at(url: str) -> Provider:
        config = ProviderConfig(role="embedder", base_url=url, model=MODEL)
        made.append(Provider(config, HTTPConfig(connect_timeout=5, read_timeout=10)))
        return made[-1]

    yield at
    for server in made:
        await server.aclose()


def _indexer(db: AsyncEngine, url: str, http: Servers, **config: Any) -> Indexer:
    return Indexer(db, OpenAIEmbedder(http(url), dim=384), MODEL, IndexerConfig(**config))


# Rows with their vector: a queued message has its full-text row at once (migration 0011).
_EMBEDDED = "SELECT message_id FROM message_embeddings WHERE embedding IS NOT NULL"

async def _ids(engine: AsyncEngine, sql: str) -> set[uuid.UUID]:
    async with engine.connect() as conn:
        return {row[0] for row in await conn.execute(text(sql))}


async def _sql(engine: AsyncEngine, sql: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(text(sql))


async def test_a_message_the_embedder_rejects_is_parked_and_everything_else_is_indexed(
    engine: AsyncEngine, http: Servers,
    embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    chat_a, ana = await import_chat(engine, "t1", "ana", [
        "hello there", f"the {POISON} message", "third line", "fourth line", "fifth line"])
    chat_b, ben = await import_chat(engine, "t2", "ben", ["ben one", "ben two", "ben three"])
    indexer = _indexer(engine, embedder_server[1], http, batch_size=4, idle_seconds=0.05)
    worker = asyncio.create_task(indexer.run())  # as a serving worker drains the queue
    try:
        for _ in range(500):
            if not await indexer.pending():
                break
            await asyncio.sleep(0.02)
    finally:
        worker.cancel()
        await asyncio.gather(worker, return_exceptions=True)

    assert await indexer.pending() == 0 and await indexer.parked() == 1
    indexed = await _ids(engine, _EMBEDDED)
    assert indexed == set(ana + ben) - {ana[1]}  # the other tenant's too
    async with engine.connect() as conn:
        [parked] = (await conn.execute(text(
            "SELECT message_id, attempts, last_error, parked_at FROM recall_queue"))).all()
    assert parked.message_id == ana[1] and parked.attempts == 3
    assert "HTTP 400" in parked.last_error and parked.parked_at is not None
    # A compaction of the chat is told that not all of it is recallable; of the other, it is.
    assert await indexer.index_chat(chat_a, wait_seconds=0.2) is False
    assert await indexer.index_chat(chat_b) is True


async def test_a_provider_that_fails_blames_no_message(
    engine: AsyncEngine, http: Servers,
    embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    server, url = embedder_server
    _, ids = await import_chat(engine, "t", "ana", ["one", "two", "three"])
    indexer = _indexer(engine, url, http)
    for status in (503, 429, 401):  # down, rate-limited, misconfigured: not the messages' fault
        server.embed_status = status
        with pytest.raises(ProviderHTTPError):
            await indexer.drain()
        async with engine.connect() as conn:
            rows = (await conn.execute(text(
                "SELECT attempts, claimed_until, parked_at FROM recall_queue"))).all()
        assert rows == [(0, None, None)] * 3  # back in the queue at once, nothing counted
    server.embed_status = 200
    assert await indexer.drain_once() == 3


async def test_a_long_messages_vector_stays_in_its_row(
    engine: AsyncEngine, http: Servers,
    embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    # 1,000 characters of distinct words: a full-text vector of ~1 KB besides the 384 floats,
    # over Postgres's 2 KB TOAST threshold and under the 4 KB target of migration 0009.
    long = " ".join(f"word{i} topic{i * 7 % 101}" for i in range(70))
    await import_chat(engine, "t", "ana", [long, "short answer"])
    assert await _indexer(engine, embedder_server[1], http).drain_once() == 2
    async with engine.connect() as conn:
        size = (await conn.execute(text(
            "SELECT max(pg_column_size(e.*)) FROM message_embeddings e"))).scalar_one()
    assert size > 2032
    assert await out_of_line(engine, "message_embeddings") == 0


async def test_indexed_rows_are_seen_at_once_and_the_pool_still_commits_durably(
    engine: AsyncEngine, http: Servers,
    embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    """The indexer's statements commit without waiting for the disk, each for itself: what
    they wrote is there for the next reader, and no connection they ran on stays that way."""
    _, ids = await import_chat(engine, "t", "ana", ["one", "two"])
    assert await _indexer(engine, embedder_server[1], http).drain_once() == 2
    assert await _ids(engine, _EMBEDDED) == set(ids)
    assert await _ids(engine, "SELECT message_id FROM recall_queue") == set()
    # Every connection the pool holds, at once (the indexer's among them).
    conns = [await engine.connect() for _ in range(3)]
    try:
        modes = {(await c.execute(text("SHOW synchronous_commit"))).scalar_one() for c in conns}
    finally:
        for c in conns:
            await c.close()
    assert modes == {"on"}


async def test_reindex_ends_with_parked_messages_reports_them_and_retries_them_next_time(
    engine: AsyncEngine, database_url: str, embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    server, url = embedder_server
    _, ids = await import_chat(engine, "t", "ana", ["one", f"a {POISON} here", "three", "four"])
    settings = Settings(database_url=database_url, embedder_url=url, embedder_model=MODEL,
                        embedding_dim=384, indexer_batch_size=2)
    out = io.StringIO()
    done = await asyncio.wait_for(reindex(settings, database_url, out=out), 30)
    assert done["messages"] == 3 and done["parked"] == 1
    assert "parked: 1 messages" in out.getvalue()

    again = await asyncio.wait_for(reindex(settings, database_url, out=io.StringIO()), 30)
    assert again["messages"] == 0 and again["parked"] == 1  # tried again, rejected again

    server.embed_reject = None  # the embedder was fixed
    fixed = await asyncio.wait_for(reindex(settings, database_url, out=io.StringIO()), 30)
    assert fixed["messages"] == 1 and fixed["parked"] == 0
    assert await _ids(engine, _EMBEDDED) == set(ids)


async def test_live_messages_are_indexed_before_backfill(
    engine: AsyncEngine, http: Servers,
    embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    await import_chat(engine, "t", "ana", ["old one", "old two", "old three"])
    # Queued earlier, as backfill: what the 0003 upgrade, `jin reindex` and a resize queue.
    await _sql(engine, "UPDATE recall_queue SET priority = 1, "
                       "enqueued_at = now() - interval '1 hour'")
    _, live = await import_chat(engine, "t", "ana", ["live one", "live two"])
    indexer = _indexer(engine, embedder_server[1], http, batch_size=2)
    assert await indexer.drain_once() == 2
    assert await _ids(engine, _EMBEDDED) == set(live)


async def test_index_chat_waits_for_what_another_worker_is_indexing(
    engine: AsyncEngine, http: Servers,
    embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    chat, ids = await import_chat(engine, "t", "ana", ["one", "two", "three"])
    slow = FakeOpenAIServer(embed_delay=0.5)
    slow_url = slow.start()
    try:
        other = asyncio.create_task(_indexer(engine, slow_url, http).drain())
        for _ in range(200):  # until the other worker holds the chat's rows
            if len(await _ids(engine, "SELECT message_id FROM recall_queue "
                                      "WHERE claimed_until > now()")) == 3:
                break
            await asyncio.sleep(0.01)
        started = time.monotonic()
        assert await _indexer(engine, embedder_server[1], http).index_chat(chat) is True
        assert time.monotonic() - started > 0.2  # it waited for the other worker's write
        assert await _ids(engine, _EMBEDDED) == set(ids)
        assert (await other).indexed == 3
    finally:
        slow.stop()


async def test_index_chat_takes_over_rows_whose_claim_expires_and_gives_up_after_its_wait(
    engine: AsyncEngine, http: Servers,
    embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    chat, ids = await import_chat(engine, "t", "ana", ["one", "two", "three"])
    indexer = _indexer(engine, embedder_server[1], http)
    held = f"('{ids[0]}', '{ids[1]}')"
    # A worker that died holding two rows, with a minute to go on its claim.
    await _sql(engine, "UPDATE recall_queue SET claimed_until = now() + interval '60 seconds' "
                       f"WHERE message_id IN {held}")
    assert await indexer.index_chat(chat, wait_seconds=0.3) is False
    assert await _ids(engine, "SELECT message_id FROM recall_queue") == set(ids[:2])

    # The claim runs out within the wait: the rows are taken over and indexed.
    await _sql(engine, "UPDATE recall_queue SET claimed_until = now() + interval '1 second'")
    started = time.monotonic()
    assert await indexer.index_chat(chat) is True
    assert time.monotonic() - started > 0.5
    assert await _ids(engine, _EMBEDDED) == set(ids)


async def test_index_chat_up_to_a_position_waits_for_nothing_after_it(
    engine: AsyncEngine, http: Servers,
    embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    """A compaction pass needs its span indexed, not the newest rows it leaves in the window."""
    chat, ids = await import_chat(engine, "t", "ana", ["one", "two", "three", "four"])
    indexer = _indexer(engine, embedder_server[1], http)
    newest = f"('{ids[2]}', '{ids[3]}')"
    await _sql(engine, "UPDATE recall_queue SET claimed_until = now() + interval '60 seconds' "
                       f"WHERE message_id IN {newest}")  # held by a worker that is busy
    async with engine.connect() as conn:
        through = (await conn.execute(text("SELECT position FROM messages WHERE id = :m"),
                                      {"m": ids[1]})).scalar_one()
    started = time.monotonic()
    assert await indexer.index_chat(chat, through=through) is True
    assert time.monotonic() - started < 1
    assert await _ids(engine, _EMBEDDED) == set(ids[:2])
    assert await indexer.index_chat(chat, wait_seconds=0.2) is False  # the whole chat: not yet


async def test_a_running_steps_message_waits_and_is_then_written_with_the_vector_it_left(
    engine: AsyncEngine, http: Servers,
    embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    server, url = embedder_server
    indexer = _indexer(engine, url, http)
    steps = PostgresStepStore(engine)
    for embedder, embedded_again in ((MODEL, False), ("another-model", True)):
        chat_id, _ = await import_chat(engine, "t1", f"ana-{embedder}", ["earlier", "reply"])
        chat = await PostgresChatStore(engine).get_chat("t1", chat_id)
        assert chat is not None
        question = f"a question for {embedder}"
        opened = await steps.open(OpenStep("t1", chat_id, uuid.uuid4(), question, 4, None, "w",
                                           30, 100, 1000))
        assert isinstance(opened, Opened)
        server.embed_inputs.clear()
        # While the step runs its message waits (the step may leave its vector), and
        # compaction's wait for the chat's queue is not held up by it.
        started = time.monotonic()
        assert await indexer.index_chat(chat_id) is True
        assert time.monotonic() - started < 2
        assert server.embed_inputs == ["earlier", "reply"]
        vector = [1.0] + [0.0] * 383
        await steps.finish(chat_id, opened.begun, FinishedStep(
            status="complete", content="an answer", reasoning="", token_count=2, usage=None,
            error_code=None, timings={}, user_vector=(embedder, vector)))
        assert await indexer.index_chat(chat_id) is True
        async with engine.connect() as conn:
            stored = (await conn.execute(text(
                "SELECT embedding::text FROM message_embeddings WHERE message_id = :m"),
                {"m": opened.begun.user_message.id})).scalar_one()
        # Another embedder's vector is not taken: the text is embedded by this one.
        assert (question in server.embed_inputs) is embedded_again
        assert (stored == "[1" + ",0" * 383 + "]") is not embedded_again


async def test_a_claim_looks_up_each_queued_messages_step_and_never_reads_every_message(
    engine: AsyncEngine,
) -> None:
    # Whether a queued message's step still runs is asked of that message by its keys. As a
    # join, the planner of a database with a few running steps and tens of thousands of
    # messages hashed the steps and read the whole messages table at every claim (20-58 ms);
    # with joins by nested loop ruled out, as that planner preferred, the check still reads
    # the message (`wm`) by its primary key.
    async with engine.connect() as conn:
        await conn.execute(text("SET enable_nestloop = off"))
        for statement, params in (
            (_CLAIM, {"chat": None, "through": 0, "n": 64, "ttl": 60.0, "priority": 1}),
            (_CLAIM_CHAT, {"chat": uuid.uuid4(), "through": 10, "n": 64, "ttl": 60.0}),
            (_CHAT_QUEUE, {"chat": uuid.uuid4(), "through": 10}),
        ):
            sql, names = positional(statement.text)
            raw = (await conn.get_raw_connection()).driver_connection
            plan = "\n".join(row[0] for row in await raw.fetch(
                "EXPLAIN " + sql, *(params[name] for name in names)))
            assert "Index Scan using messages_pkey on messages wm" in plan, plan
        # A chat's claim starts from the chat's messages, whatever the queue holds before them
        # (the plan made once for every chat: a claim behind a backfill must not walk it).
        await conn.execute(text("RESET enable_nestloop"))
        await conn.execute(text("SET plan_cache_mode = force_generic_plan"))
        sql, names = positional(_CLAIM_CHAT.text)
        params = {"chat": uuid.uuid4(), "through": 10, "n": 64, "ttl": 60.0}
        plan = "\n".join(row[0] for row in await raw.fetch(
            "EXPLAIN " + sql, *(params[name] for name in names)))
        assert "Index Scan using messages_" in plan and "on messages cm" in plan, plan
        assert "Seq Scan on messages cm" not in plan, plan
        await conn.rollback()


async def test_a_chat_deleted_while_its_messages_are_written_waits_for_no_deadlock(
    engine: AsyncEngine, http: Servers,
    embedder_server: tuple[FakeOpenAIServer, str],
) -> None:
    # Deleting a chat locks its messages, then (the cascade) their queue rows. The indexer's
    # one statement takes them in that order too: messages first. Taken the other way (queue
    # rows first, messages at the statement's end by its foreign key check), each waits for
    # the other, and Postgres fails one of them after its deadlock timeout.
    chat_id, ids = await import_chat(engine, "t", "ana", ["one", "two", "three"])
    indexer = _indexer(engine, embedder_server[1], http)
    vectors = [[1.0] + [0.0] * 383] * len(ids)
    async with engine.connect() as deleting:  # a chat deletion, half-way through
        await deleting.execute(text("SELECT 1 FROM messages WHERE chat_id = :c FOR UPDATE"),
                               {"c": chat_id})
        writing = asyncio.create_task(indexer._write(ids, vectors))
        await until_waiting(engine)  # the write is under way, waiting for them
        async with asyncio.timeout(5):
            await deleting.execute(text("DELETE FROM chats WHERE id = :c"), {"c": chat_id})
        await deleting.commit()
    async with asyncio.timeout(5):
        await writing  # no deadlock error on either side, and nothing written
    assert await _ids(engine, _EMBEDDED) == set()
    assert await _ids(engine, "SELECT message_id FROM recall_queue") == set()

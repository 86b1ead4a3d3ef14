"""TIME_COMPRESS written on real Postgres, with the fake helper over HTTP: summaries by the
helper with a byte-stable prefix (the sources' texts when it fails), pointers and TTL on the
sources, summaries merged again up the ladder, a purge that never takes a source whose summary
is not committed, and two workers that never merge one group twice."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from llm.openai import OpenAIChatModel
from llm.provider import Provider
from llm.testing import FakeOpenAIServer, Reply
from llm.types import HTTPConfig, ProviderConfig
from memory.events.cards import CardChange as ChangeCard
from memory.events.compression import plan
from memory.events.compression_store import NewSummary, PostgresCompressionStore
from memory.events.compressor import Compressor, CompressorConfig
from memory.events.listing import EventListing
from memory.events.schema import load_schemas
from memory.events.store import PostgresEventStore
from memory.events.summaries import PREFIX

# A Tuesday and a Wednesday, five weeks back: seen from two days after, they are daily merges;
# from ten days after, their week is one weekly merge.
MONDAY = (datetime.now(UTC) - timedelta(weeks=5)).replace(
    hour=0, minute=0, second=0, microsecond=0)
MONDAY -= timedelta(days=MONDAY.weekday())
TUESDAY, WEDNESDAY = MONDAY + timedelta(days=1, hours=10), MONDAY + timedelta(days=2, hours=10)


@pytest.fixture
async def helper_model(helper_url: str) -> AsyncIterator[OpenAIChatModel]:
    provider = Provider(ProviderConfig(role="helper", base_url=helper_url, model="fake"),
                        HTTPConfig(connect_timeout=5, read_timeout=10))
    yield OpenAIChatModel(provider)
    await provider.aclose()


async def add_event(engine: AsyncEngine, at: datetime, summary: str, topic: str = "garden",
                    user: str = "ann", tenant: str = "acme") -> uuid.UUID:
    event_id = uuid.uuid4()
    async with engine.begin() as conn:
        await conn.execute(text(
            "INSERT INTO events (id, tenant_id, user_id, type, topic, properties, summary, "
            "started_at, ended_at) VALUES (:id, :t, :u, 'discussion', :topic, '{}', :s, :at, :at)"),
            {"id": event_id, "t": tenant, "u": user, "topic": topic, "s": summary, "at": at})
    return event_id


async def rows(engine: AsyncEngine, sql: str, **params: Any) -> list[Any]:
    async with engine.connect() as conn:
        return [dict(r) for r in (await conn.execute(text(sql), params)).mappings().all()]


def compressor(engine: AsyncEngine, helper: OpenAIChatModel | None,
               ttl: timedelta = timedelta(hours=1)) -> Compressor:
    return Compressor(PostgresCompressionStore(engine), helper, None, None,
                      CompressorConfig(ttl=ttl))


async def test_the_helper_writes_each_summary_and_the_sources_point_to_it_with_a_ttl(
    engine: AsyncEngine, helper: FakeOpenAIServer, helper_model: OpenAIChatModel,
) -> None:
    garden = [await add_event(engine, TUESDAY + timedelta(hours=h), f"planted {plant}")
              for h, plant in ((0, "tomatoes"), (1, "basil"))]
    chess = [await add_event(engine, WEDNESDAY + timedelta(hours=h), said, topic="chess")
             for h, said in ((0, "learned the Sicilian"), (2, "lost to the Sicilian"))]
    lone = await add_event(engine, WEDNESDAY, "a walk", topic="walks")  # alone: stays
    helper.push(Reply(["Chess: learned the Sicilian, then lost to it."]),
                Reply(["Garden: planted tomatoes and basil."]))

    done = await compressor(engine, helper_model).compress(
        "acme", "ann", now=MONDAY + timedelta(days=4))

    assert (done.planned, done.summaries, done.compressed, done.fallbacks) == (2, 2, 4, 0)
    summaries = await rows(engine, "SELECT * FROM events WHERE level IS NOT NULL ORDER BY topic")
    assert [(s["topic"], s["level"], s["type"]) for s in summaries] == [
        ("chess", "daily", "summary"), ("garden", "daily", "summary")]
    assert summaries[1]["summary"] == "Garden: planted tomatoes and basil."
    assert summaries[1]["source_event_ids"] == garden
    assert summaries[0]["source_event_ids"] == chess
    assert summaries[1]["started_at"] == TUESDAY and summaries[1]["ended_at"] == \
        TUESDAY + timedelta(hours=1)
    sources = await rows(engine, "SELECT id, compressed_into, expires_at - now() AS left "
                                 "FROM events WHERE compressed_into IS NOT NULL")
    assert {s["id"] for s in sources} == set(garden + chess)
    assert all(timedelta(minutes=59) < s["left"] <= timedelta(hours=1) for s in sources)
    [walk] = await rows(engine, "SELECT compressed_into, expires_at FROM events WHERE id = :id",
                        id=lone)
    assert (walk["compressed_into"], walk["expires_at"]) == (None, None)

    # One call per group, each with the same system message: the model server's prefix cache
    # stays warm; the group follows in the user message.
    first, second = helper.requests
    assert first["messages"][0] == second["messages"][0] == {"role": "system",
                                                              "content": PREFIX}
    assert "planted tomatoes" in second["messages"][1]["content"]
    assert "Topic: garden" in second["messages"][1]["content"]

    # What /v1/events reads: the summary with its sources, each with its expiry.
    listed = await EventListing(engine).events("acme", "ann", 10, None)
    summary = next(e for e in listed if e["topic"] == "garden" and e["level"])
    assert summary["compressed_from"] == [str(g) for g in garden]
    assert [s["kept"] for s in summary["sources"]] == [True, True]
    assert all(s["expires_at"] for s in summary["sources"])
    assert await PostgresCompressionStore(engine).counts() == {
        "summaries": 2, "compressed": 4, "purged": 0, "expiring": 4}


async def test_a_failing_helper_leaves_a_summary_of_the_sources_own_texts(
    engine: AsyncEngine, helper: FakeOpenAIServer, helper_model: OpenAIChatModel,
) -> None:
    for h, said in ((0, "planted tomatoes"), (1, "planted basil"), (2, "planted tomatoes")):
        await add_event(engine, TUESDAY + timedelta(hours=h), said)
    helper.push(Reply(status=500, error="the helper is down"))
    done = await compressor(engine, helper_model).compress(now=MONDAY + timedelta(days=4))
    assert (done.summaries, done.fallbacks) == (1, 1)
    [summary] = await rows(engine, "SELECT summary, properties FROM events WHERE level = 'daily'")
    assert summary["summary"] == (f"garden, daily from {TUESDAY.date()}: planted tomatoes; "
                                  "planted basil")
    assert summary["properties"]["by_helper"] is False


async def test_summaries_merge_again_up_the_ladder_and_expired_sources_are_purged(
    engine: AsyncEngine,
) -> None:
    for day in (TUESDAY, WEDNESDAY):
        for h in (0, 1):
            await add_event(engine, day + timedelta(hours=h), f"weeding {day:%A} {h}")
    # The sources' TTL is none: purged in the pass that merged them.
    compress = compressor(engine, None, ttl=timedelta(0))
    daily = await compress.compress(now=MONDAY + timedelta(days=4))
    assert (daily.summaries, daily.compressed, daily.purged) == (2, 4, 4)
    days = await rows(engine, "SELECT id, source_event_ids FROM events ORDER BY started_at")
    assert len(days) == 2 and all(len(d["source_event_ids"]) == 2 for d in days)

    weekly = await compress.compress(now=MONDAY + timedelta(days=12))
    assert (weekly.summaries, weekly.compressed, weekly.purged) == (1, 2, 2)
    [week] = await rows(engine, "SELECT * FROM events")
    assert week["level"] == "weekly" and week["source_event_ids"] == [d["id"] for d in days]
    assert week["properties"]["types"] == ["discussion"]  # its sources' sources' types
    assert week["started_at"] == TUESDAY and week["ended_at"] == WEDNESDAY + timedelta(hours=1)
    [listed] = await EventListing(engine).events("acme", "ann", 10, None)
    assert [s["kept"] for s in listed["sources"]] == [False, False]  # pointers kept, rows gone
    assert await PostgresCompressionStore(engine).counts() == {
        "summaries": 3, "compressed": 6, "purged": 6, "expiring": 0}


async def test_nothing_is_purged_or_given_a_ttl_whose_summary_is_not_committed(
    engine: AsyncEngine,
) -> None:
    store = PostgresCompressionStore(engine)
    ids = [await add_event(engine, TUESDAY + timedelta(hours=h), f"pruning {h}")
           for h in range(3)]
    [merge] = plan(await store.dated(None, None), MONDAY + timedelta(days=4))

    # A summary that fails to write (Postgres refuses a NUL in text) rolls back whole.
    holder = uuid.uuid4()
    assert await store.claim(merge, holder, 60)
    sources = await store.sources(merge)
    broken = NewSummary(uuid.uuid4(), merge, "bad\x00text", sources, None, None, False)
    with pytest.raises(asyncpg.exceptions.CharacterNotInRepertoireError):
        await store.write(broken, holder, timedelta(0))
    await store.release(merge, holder)
    # A source deleted between the helper's call and the write: nothing is written.
    holder = uuid.uuid4()
    assert await store.claim(merge, holder, 60)
    async with engine.begin() as conn:
        await conn.execute(text("DELETE FROM events WHERE id = :id"), {"id": ids[0]})
    good = NewSummary(uuid.uuid4(), merge, "pruning", sources, None, None, False)
    assert not await store.write(good, holder, timedelta(0))
    await store.release(merge, holder)

    assert await store.purge() == 0
    left = await rows(engine, "SELECT level, compressed_into, expires_at, compress_holder "
                              "FROM events")
    assert len(left) == 2
    assert all(r["level"] is None and r["compressed_into"] is None and r["expires_at"] is None
               and r["compress_holder"] is None for r in left)

    # A deleted summary gives its sources back without a TTL; an expired event whose summary
    # is gone is never purged.
    done = await compressor(engine, None).compress(now=MONDAY + timedelta(days=4))
    assert done.summaries == 1
    [summary] = await rows(engine, "SELECT id FROM events WHERE level IS NOT NULL")
    assert await EventListing(engine).delete_event("acme", "ann", summary["id"])
    back = await rows(engine, "SELECT compressed_into, expires_at FROM events")
    assert back == [{"compressed_into": None, "expires_at": None}] * 2
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE events SET expires_at = now() - interval '1 day'"))
    assert await store.purge() == 0
    assert len(await rows(engine, "SELECT id FROM events")) == 2


async def test_two_workers_at_once_merge_a_group_once_with_one_helper_call(
    engine: AsyncEngine, helper: FakeOpenAIServer, helper_model: OpenAIChatModel,
) -> None:
    for h in range(4):
        await add_event(engine, TUESDAY + timedelta(hours=h), f"composting {h}")
    # One reply, slow: a second call for the group would find none (the strict fake fails).
    helper.push(Reply(["Composting, four times."], delay=1.0))
    now = MONDAY + timedelta(days=4)
    first, second = await asyncio.gather(compressor(engine, helper_model).compress(now=now),
                                          compressor(engine, helper_model).compress(now=now))
    assert sorted((p.summaries, p.skipped) for p in (first, second)) == [(0, 1), (1, 0)]
    [summary] = await rows(engine, "SELECT summary, source_event_ids FROM events "
                                   "WHERE level IS NOT NULL")
    assert summary["summary"] == "Composting, four times."
    assert len(summary["source_event_ids"]) == 4
    assert len(helper.requests) == 1


async def test_other_users_and_tenants_are_left_alone(engine: AsyncEngine) -> None:
    for tenant, user in (("acme", "ann"), ("acme", "bob"), ("other", "ann")):
        for h in (0, 1):
            await add_event(engine, TUESDAY + timedelta(hours=h), "hoeing", user=user,
                            tenant=tenant)
    done = await compressor(engine, None).compress("acme", "ann", now=MONDAY + timedelta(days=4))
    assert done.summaries == 1
    merged = await rows(engine, "SELECT tenant_id, user_id FROM events "
                                "WHERE compressed_into IS NOT NULL OR level IS NOT NULL")
    assert {(r["tenant_id"], r["user_id"]) for r in merged} == {("acme", "ann")}


async def test_the_time_compress_field_is_written_from_the_summaries_it_reads(
    engine: AsyncEngine,
) -> None:
    cards = PostgresEventStore(engine)
    schemas = load_schemas()  # user_profile.history: discussion and profile_fact, 365 days
    profile = ChangeCard("user_profile", "", {"nickname": "Sasha"}, "## nickname\nSasha", 0,
                         "nickname (replace):\nSasha", (), 1)
    assert await cards.save_card("acme", "ann", profile, None, None, [])
    for day in (TUESDAY, WEDNESDAY):
        for h in (0, 1):
            await add_event(engine, day + timedelta(hours=h), f"mulching {day:%A} {h}")
    async with engine.begin() as conn:  # a task's updates: not what history reads
        for h in (0, 1):
            event_id = await add_event(engine, TUESDAY + timedelta(hours=h), "fence",
                                       topic="fence")
            await conn.execute(text("UPDATE events SET type = 'task_update' WHERE id = :id"),
                               {"id": event_id})
    compress = Compressor(PostgresCompressionStore(engine), None, None, None,
                          CompressorConfig(), cards=cards, schemas=schemas)

    daily = await compress.compress(now=MONDAY + timedelta(days=4))
    assert (daily.summaries, daily.cards) == (3, 1)
    [card] = await EventListing(engine).entities("acme", "ann", 10, None)
    assert card["fields"]["nickname"] == "Sasha"  # the other fields stay
    assert card["fields"]["history"] == "\n".join([
        f"- {TUESDAY.date()} (daily) garden: garden, daily from {TUESDAY.date()}: "
        f"mulching {TUESDAY:%A} 0; mulching {TUESDAY:%A} 1",
        f"- {WEDNESDAY.date()} (daily) garden: garden, daily from {WEDNESDAY.date()}: "
        f"mulching {WEDNESDAY:%A} 0; mulching {WEDNESDAY:%A} 1"])
    v1, v2 = card["versions"]
    assert v2["patch"] == "TIME_COMPRESS: 2 summaries" and len(v2["source_events"]) == 2

    # A week later the two days are one weekly summary, and the field shows it alone.
    weekly = await compress.compress(now=MONDAY + timedelta(days=12))
    assert (weekly.summaries, weekly.cards) == (1, 1)
    [card] = await EventListing(engine).entities("acme", "ann", 10, None)
    assert card["version"] == 3
    assert card["fields"]["history"].startswith(f"- {MONDAY.date()} (weekly) garden: ")
    assert "\n" not in card["fields"]["history"]
    # A year on, the summary is outside the field's 365 days: nothing else changed, so the
    # card is not rewritten until a pass writes this user a new summary.
    assert (await compress.compress(now=MONDAY + timedelta(days=400))).cards == 0

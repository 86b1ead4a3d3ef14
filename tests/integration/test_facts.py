"""Durable facts in Postgres: never duplicated, superseded with history, scoped to their user."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from llm.onnx_embedder import OnnxMiniLM
from memory.store import PostgresFactStore
from tests.integration.history import import_chat, out_of_line


@pytest.fixture
def store(engine: AsyncEngine, minilm: OnnxMiniLM) -> PostgresFactStore:
    return PostgresFactStore(engine, minilm, minilm.name)


async def _rows(engine: AsyncEngine) -> list[tuple]:
    async with engine.connect() as conn:
        return [tuple(r) for r in (await conn.execute(text(
            "SELECT user_id, text, source_message_ids, valid_to IS NULL, superseded_by "
            "FROM memories WHERE user_id <> 'bo' ORDER BY user_id, valid_from"))).all()]


async def test_the_same_fact_twice_updates_one_row_and_users_stay_apart(
    store: PostgresFactStore, engine: AsyncEngine,
) -> None:
    first, second = uuid.uuid4(), uuid.uuid4()
    assert await store.remember("t", "ana", ["- Ana's locker is LCK-0042."], [first]) == 1
    assert await store.remember("t", "ana", ["ana's   locker is LCK-0042"], [second]) == 0
    assert await store.remember("t", "ben", ["- Ana's locker is LCK-0042."], [second]) == 1
    rows = await _rows(engine)
    assert [(r[0], r[1]) for r in rows] == [
        ("ana", "Ana's locker is LCK-0042."), ("ben", "Ana's locker is LCK-0042.")]
    assert set(rows[0][2]) == {first, second}


async def test_a_facts_vector_stays_in_its_row(
    store: PostgresFactStore, engine: AsyncEngine,
) -> None:
    # ~2.1 KB with its normalized text, full text and 384 floats: over Postgres's 2 KB TOAST
    # threshold, under the 4 KB target of migration 0009.
    fact = ("Ana keeps the spare keys of the bakery on Shevchenko street in the blue tin under "
            "the counter, next to the till.")
    assert await store.remember("t", "ana", [fact], []) == 1
    assert await out_of_line(engine, "memories") == 0
    # Without the target, as before 0009, the same row's vector goes to TOAST, where recall's
    # exact scans and the duplicate lookup read it through the TOAST index.
    async with engine.begin() as conn:
        await conn.execute(text("ALTER TABLE memories RESET (toast_tuple_target)"))
    assert await store.remember("t", "ben", [fact], []) == 1
    assert await out_of_line(engine, "memories") == 1


async def test_a_close_paraphrase_supersedes_the_fact_and_keeps_its_history(
    store: PostgresFactStore, engine: AsyncEngine,
) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    [added] = await store.write("t", "ana", ["The user's favourite colour is green."], [a],
                                origin="tool")
    [again] = await store.write("t", "ana", ["The user's favourite colour is green!"], [b],
                                origin="tool")
    [other] = await store.write("t", "ana", ["The user works at a bakery in Lviv."], [b],
                                origin="tool")
    assert (added.action, again.action, other.action) == ("added", "superseded", "added")
    # Alike in wording, apart in what they say: two facts, however close their vectors.
    rooms = await store.write("t", "bo", ["Room 101 has code K7001.", "Room 102 has code K7002."],
                              [], origin="flush")
    assert [w.action for w in rooms] == ["added", "added"]
    assert again.replaced == added.id
    rows = await _rows(engine)
    current = [r for r in rows if r[3]]
    assert sorted(r[1] for r in current) == [
        "The user works at a bakery in Lviv.", "The user's favourite colour is green!"]
    old = next(r for r in rows if not r[3])  # the superseded version, with its successor
    assert old[1] == "The user's favourite colour is green." and old[4] == again.id
    successor = next(r for r in rows if r[1].endswith("green!"))
    assert set(successor[2]) == {a, b}  # sources carried over


async def test_forget_ends_a_fact_for_its_owner_only(store: PostgresFactStore) -> None:
    [fact] = await store.write("t", "ana", ["Ana's flight is on 14 March."], [], origin="api")
    assert await store.forget("t", "ben", fact_id=fact.id) == []  # not ben's to forget
    assert [f.text for f in await store.list("t", "ana")] == ["Ana's flight is on 14 March."]
    gone = await store.forget("t", "ana", text_="ana's flight is on 14 march")
    assert [f.id for f in gone] == [fact.id] and gone[0].valid_to is not None
    assert await store.list("t", "ana") == []
    assert [f.id for f in await store.list("t", "ana", history=True)] == [fact.id]


GREEN = "The user's favourite colour is green."
GREEN_2 = "The user's favourite colour is green!"
GREEN_3 = "The user's favorite colour is green!"


async def _state(engine: AsyncEngine, user: str) -> list[tuple]:
    """A user's facts as text: current or not, and the text of the fact that replaced it."""
    async with engine.connect() as conn:
        rows = (await conn.execute(text(
            "SELECT m.text, m.valid_to IS NULL, s.text, m.source_message_ids FROM memories m "
            "LEFT JOIN memories s ON s.id = m.superseded_by "
            "WHERE m.user_id = :u ORDER BY m.text, m.valid_to NULLS FIRST"), {"u": user})).all()
    return [(r[0], r[1], r[2], sorted(map(str, r[3]))) for r in rows]


@pytest.mark.parametrize("stored, written", [
    ([], [GREEN, GREEN_2]),  # the second supersedes the first, written a moment before
    ([], [GREEN, GREEN_2, GREEN_3]),  # a chain of three within one write
    ([GREEN], ["the user's favourite colour is green", GREEN_2]),  # touched, then superseded
    ([GREEN], [GREEN_2, GREEN]),  # the paraphrase ends it, then its own text comes back
    ([GREEN, "Room 101 has code K7001."],
     ["Room 102 has code K7002.", GREEN_2, "Room 101 has code K7001", "Ana lives in Lviv."]),
])
async def test_facts_written_together_end_as_written_one_by_one(
    store: PostgresFactStore, engine: AsyncEngine, stored: list[str], written: list[str],
) -> None:
    before, now = uuid.uuid4(), uuid.uuid4()
    for user in ("together", "one-by-one"):
        await store.write("t", user, stored, [before], origin="tool")
    together = await store.write("t", "together", written, [now], origin="flush")
    one_by_one = [w for fact in written
                  for w in await store.write("t", "one-by-one", [fact], [now], origin="flush")]
    assert [(w.action, w.text) for w in together] == [(w.action, w.text) for w in one_by_one]
    assert await _state(engine, "together") == await _state(engine, "one-by-one")


async def test_a_flushed_fact_names_the_messages_of_its_span_that_said_it(
    store: PostgresFactStore, engine: AsyncEngine,
) -> None:
    """The flush writes its facts with the span it read; each fact keeps the messages that say
    it, so that recall can find them through it, and the whole span when none does."""
    lines = ["Hi Ana! How was the trip?", "Long, but the kids loved the mountains.",
             "We adopted a ginger kitten from the shelter last week!", "Oh lovely, a name?",
             "Rocket. He climbs the curtains already, our little kitten.",
             "Grey and drizzly here again.", "Ours too. Back to work on Monday, sadly."]
    _, ids = await import_chat(engine, "t", "ana", lines)
    kitten, name, unsaid = ("Ana adopted a ginger kitten from the shelter",
                            "The kitten is called Rocket", "Cello lessons begin in spring")
    await store.write("t", "ana", [kitten, name, unsaid], ids, origin="flush")
    sources = {f.text: f.sources for f in await store.list("t", "ana")}
    assert sources[kitten] == [ids[2]]
    assert sources[name] == [ids[4]]
    assert set(sources[unsaid]) == set(ids)
    # The same fact written again from a later span gains the message that says it there.
    _, later = await import_chat(engine, "t", "ana", ["How is the ginger kitten from the shelter?",
                                                      "Sleeping on my keyboard, as always."])
    [again] = await store.write("t", "ana", [kitten], later, origin="flush")
    assert again.action == "updated"
    assert set((await store.get("t", "ana", again.id)).sources) == {ids[2], later[0]}

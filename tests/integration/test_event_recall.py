"""Events and entity cards recalled beside messages and facts, against real Postgres and MiniLM."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import numpy as np
from pgvector import Vector
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from llm.onnx_embedder import OnnxMiniLM
from memory.late_interaction import pack
from memory.ranking import RecallConfig, RecallQuery, render
from memory.recall_store import PostgresRecall
from tests.integration.history import T0, import_chat

_EVENT = text("""
INSERT INTO events (id, tenant_id, user_id, chat_id, type, topic, properties, summary,
                    embedding, embedder, started_at, ended_at, compressed_into)
VALUES (:id, :t, :u, :chat, :type, :topic, '{}'::jsonb, :summary, :v, 'minilm', :at, :at,
        :into)""")
_CARD = text("""
INSERT INTO entities (id, tenant_id, user_id, type, key, fields, card, version, embedding,
                      embedder)
VALUES (:id, :t, :u, :type, '', '{}'::jsonb, :card, 1, :v, 'minilm')""")


async def _event(engine: AsyncEngine, minilm: OnnxMiniLM, user: str, type_: str, topic: str,
                 summary: str, *, chat: uuid.UUID | None = None, minutes: int = 0,
                 into: uuid.UUID | None = None, tenant: str = "t") -> uuid.UUID:
    [vector] = await minilm.embed([summary])
    event_id = uuid.uuid4()
    async with engine.begin() as conn:
        await conn.execute(_EVENT, {
            "id": event_id, "t": tenant, "u": user, "chat": chat, "type": type_,
            "topic": topic, "summary": summary, "v": Vector(vector),
            "at": T0 + timedelta(minutes=minutes), "into": into})
    return event_id


async def _card(engine: AsyncEngine, minilm: OnnxMiniLM, user: str, type_: str,
                card: str) -> uuid.UUID:
    [vector] = await minilm.embed([card])
    card_id = uuid.uuid4()
    async with engine.begin() as conn:
        await conn.execute(_CARD, {"id": card_id, "t": "t", "u": user, "type": type_,
                                   "card": card, "v": Vector(vector)})
    return card_id


def _recall(engine: AsyncEngine, minilm: OnnxMiniLM, **config: object) -> PostgresRecall:
    return PostgresRecall(engine, minilm, lambda s: len(s.split()),
                          RecallConfig(**config),  # type: ignore[arg-type]
                          token_embedder=minilm)


async def test_a_nickname_question_finds_the_event_and_the_card_of_that_user_only(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    await import_chat(engine, "t", "ana", ["Call me Sparky from now on, please", "Sure!"])
    nickname = await _event(engine, minilm, "ana", "profile_fact", "identity",
                            "profile_fact · identity: attribute: nickname; value: Sparky")
    profile = await _card(engine, minilm, "ana", "user_profile",
                          "- Lives in Lviv\n- Nickname: Sparky\n- Works as a nurse")
    await _event(engine, minilm, "ben", "profile_fact", "identity",
                 "profile_fact · identity: attribute: nickname; value: Bolt")
    await _event(engine, minilm, "ana", "profile_fact", "identity",
                 "profile_fact · identity: attribute: nickname; value: Other tenant",
                 tenant="other")
    recall = _recall(engine, minilm)

    for mode in ("hybrid", "keyword", "dense"):
        result = await recall.search("t", "ana", "do you remember my nickname?", mode=mode,
                                     limit=10)  # type: ignore[arg-type]
        by_id = {item.id: item for item in result.items}
        assert nickname in by_id and profile in by_id, mode
        assert "Bolt" not in str(result.items) and "Other tenant" not in str(result.items)
        event, card = by_id[nickname], by_id[profile]
        assert (event.source, event.role, card.source, card.role) == (
            "event", "profile_fact", "entity", "user_profile")
        if mode != "dense":  # each list's own measure, as messages and facts show theirs
            assert event.scores["keyword_rank"] is not None and event.scores["keyword"]
        if mode != "keyword":
            assert event.scores["dense_rank"] is not None
    assert render(event).startswith("- [2026-10-01 · event profile_fact] profile_fact")
    assert render(card).startswith(f"- [{card.created_at.date()} · user_profile card]")


async def test_type_weights_order_the_sources_and_events_can_be_left_out(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    await _event(engine, minilm, "ana", "discussion", "tea",
                 "discussion · tea: summary: the user drinks green tea every morning")
    await _event(engine, minilm, "ana", "preference_stated", "tea",
                 "preference_stated · tea: subject: green tea; stance: likes", minutes=1)
    question = RecallQuery("t", "ana", "what tea do I drink?")
    recall = _recall(engine, minilm)

    async def order(**weights: float) -> list[str]:
        cfg = replace(recall.config, type_weights=tuple(weights.items()))
        return [item.role for item in (await recall.recall(question, cfg)).items]

    assert sorted(await order()) == ["discussion", "preference_stated"]
    assert (await order(discussion=3.0))[0] == "discussion"
    assert (await order(preference_stated=3.0))[0] == "preference_stated"
    assert await order(discussion=0.0) == ["preference_stated"]  # a weight of 0 leaves it out
    off = await recall.recall(question, replace(recall.config, events=False))
    assert off.items == []


async def test_merged_events_come_back_through_their_summary_and_the_window_keeps_its_own(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    chat, ids = await import_chat(engine, "t", "ana", ["I ran ten kilometres today", "Great!"])
    summary = await _event(engine, minilm, "ana", "discussion", "running",
                           "discussion · running: summary: a week of running, 42 km in all")
    merged = await _event(engine, minilm, "ana", "discussion", "running",
                          "discussion · running: summary: ran ten kilometres", into=summary)
    own = await _event(engine, minilm, "ana", "task_update", "running plan",
                       "task_update · running plan: task: ten kilometres run; status: done",
                       chat=chat, minutes=1)
    recall = _recall(engine, minilm)
    question = "how far did I run?"

    found = {i.id for i in (await recall.recall(RecallQuery("t", "ana", question))).items}
    assert summary in found and own in found and merged not in found
    # The chat's window from its first row on: its own event is in the window, not recalled.
    shown = RecallQuery("t", "ana", question, shown_from=(chat, 0, T0))
    found = {i.id for i in (await recall.recall(shown)).items}
    assert summary in found and own not in found
    # Started over after the event: the chat's rows before the line stay forgotten.
    hidden = RecallQuery("t", "ana", question, hide=(chat, T0 + timedelta(hours=1)))
    assert own not in {i.id for i in (await recall.recall(hidden)).items}
    assert ids  # (the chat's rows themselves are not indexed here: only the events)


_SEGMENT = text("UPDATE events SET segment_embedding = :v WHERE id = :id")
_LINK = text("""
INSERT INTO event_keyword_links (tenant_id, user_id, keyword, event_id)
SELECT :t, :u, k, :id FROM unnest(CAST(:keywords AS text[])) k""")
_KEYWORD = text("""
SELECT events, embedding FROM event_keywords WHERE tenant_id = 't' AND user_id = :u
  AND keyword = :k""")


async def _held(engine: AsyncEngine, minilm: OnnxMiniLM, user: str, summary: str,
                segment: str, keywords: list[str], minutes: int = 0) -> uuid.UUID:
    """An event as extraction writes it: with its turns' embedding and its keywords."""
    event_id = await _event(engine, minilm, user, "profile_fact", keywords[0], summary,
                            minutes=minutes)
    [vector] = await minilm.embed([segment])
    async with engine.begin() as conn:
        await conn.execute(_SEGMENT, {"id": event_id, "v": Vector(vector)})
        await conn.execute(_LINK, {"t": "t", "u": user, "id": event_id, "keywords": keywords})
    return event_id


# A profile of facts that read alike as events ("profile_fact · ...: attribute: ...").
_PROFILE = [
    ("home city", "Lviv", "I live in Lviv, near the old town"),
    ("job", "nurse", "I work night shifts as a nurse at the city hospital"),
    ("pet", "a cat named Pixel", "My cat Pixel knocks everything off the table"),
    ("language", "Ukrainian and Polish", "At home we speak Ukrainian, at work Polish too"),
    ("allergy", "peanuts", "I am allergic to peanuts, so no satay for me"),
    ("birthday", "May 3", "My birthday is on the third of May"),
    ("car", "an old Skoda", "I still drive my old Skoda to work"),
    ("sport", "swimming", "I swim twice a week at the pool"),
]


async def test_the_keyword_graph_reaches_an_event_through_the_turns_its_keyword_holds(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    for n, (attribute, value, said) in enumerate(_PROFILE):
        await _held(engine, minilm, "ana", f"profile_fact · {attribute}: attribute: "
                    f"{attribute}; value: {value}", said, [attribute, value.lower()], n)
    nickname = await _held(engine, minilm, "ana",
                           "profile_fact · name: attribute: nickname; value: Sparky",
                           "Please call me Sparky from now on", ["name", "nickname", "sparky"])
    recall = _recall(engine, minilm)
    question = RecallQuery("t", "ana", "what should you call me?")

    on = (await recall.recall(question)).items
    off = (await recall.recall(question, replace(recall.config, graph=False))).items
    place = {item.id: n for n, item in enumerate(on)}
    assert place[nickname] == 0, [i.text for i in on]
    assert on[0].scores["graph_rank"] == 1 and on[0].scores["graph"]
    assert nickname not in [i.id for i in off[:1]], [i.text for i in off]
    assert all("graph_rank" not in i.scores or i.scores["graph_rank"] is None for i in off)


async def test_a_keywords_embedding_is_the_mean_of_its_events_turns_as_events_come_and_go(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    said = ["Call me Sparky", "Actually, my friends call me Spark"]
    first = await _held(engine, minilm, "ana", "profile_fact · name: nickname Sparky", said[0],
                        ["nickname", "sparky"])
    second = await _held(engine, minilm, "ana", "profile_fact · name: nickname Spark", said[1],
                         ["nickname", "spark"])
    a, b = await minilm.embed(said)

    async def keyword(k: str) -> tuple[int, np.ndarray] | None:
        async with engine.connect() as conn:
            row = (await conn.execute(_KEYWORD, {"u": "ana", "k": k})).first()
        return None if row is None else (row.events, row.embedding.to_numpy())

    count, mean = await keyword("nickname") or (0, None)
    assert count == 2 and np.allclose(mean, (a + b) / 2, atol=1e-5)
    async with engine.begin() as conn:
        await conn.execute(text("DELETE FROM events WHERE id = :id"), {"id": first})
    count, mean = await keyword("nickname") or (0, None)
    assert count == 1 and np.allclose(mean, b, atol=1e-5)
    assert await keyword("sparky") is None  # its only event gone, the keyword goes too
    async with engine.begin() as conn:
        await conn.execute(text("DELETE FROM events WHERE id = :id"), {"id": second})
    assert await keyword("nickname") is None


async def test_the_rerank_scores_events_by_their_tokens_against_the_questions(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    texts = {"dentist": "commitment · dentist: what: see the dentist about the molar; who: user",
             "train": "commitment · trip: what: buy train tickets to Kraków; who: user",
             "report": "task_update · report: task: quarterly report; status: in_progress"}
    ids = {}
    for name, summary in texts.items():
        ids[name] = await _event(engine, minilm, "ana", summary.split(" ·")[0], name, summary)
        [tokens] = await minilm.token_vectors([summary])
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE events SET tokens = :b WHERE id = :id"),
                               {"b": pack(tokens), "id": ids[name]})
    recall = _recall(engine, minilm, rerank=True)
    question = RecallQuery("t", "ana", "did I buy the tickets to Kraków?")

    result = await recall.recall(question)
    late = {item.id: item.scores for item in result.items}
    assert late[ids["train"]]["late_rank"] == 1 and late[ids["train"]]["late"] > 0.5
    assert all(s["late_rank"] for s in late.values())  # every event found is reranked
    assert "rerank_ms" in result.timings
    plain = await recall.recall(question, replace(recall.config, rerank=False))
    assert all("late_rank" not in item.scores for item in plain.items)
    # Without the rerank the fusion has one list fewer: the same event leads with less.
    assert plain.items[0].id == ids["train"]
    assert late[ids["train"]]["fused"] > plain.items[0].scores["fused"]


async def test_an_events_vector_stays_in_its_row_beside_its_token_vectors(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    # Recall's exact scan computes each event's distance: a vector moved to the TOAST table is
    # read back for every event of the user (migration 0022).
    summary = ("profile_fact · pet: attribute: the cat's name; value: Miso, a grey British "
               "shorthair adopted in March from the shelter on Franka street")
    event_id = await _event(engine, minilm, "ana", "profile_fact", "pet", summary)
    [tokens] = await minilm.token_vectors([summary])
    [turn] = await minilm.embed(["My cat is called Miso, we got her from the shelter in March"])
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE events SET tokens = :b, segment_embedding = :s "
                                "WHERE id = :id"),
                           {"b": pack(tokens), "s": Vector(turn), "id": event_id})
        row = (await conn.execute(text(
            "SELECT pg_column_toast_chunk_id(embedding) AS vector, "
            "pg_column_toast_chunk_id(tokens) AS tokens FROM events WHERE id = :id"),
            {"id": event_id})).one()
    assert row.tokens is not None  # the token vectors are what leaves the row
    assert row.vector is None

"""Indexing, recall and reindexing against real Postgres and real embedders."""

from __future__ import annotations

import asyncio
import io
import random
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import downgrade, migrate
from api.reindex import reindex
from api.settings import Settings
from db.engine import create_engine
from llm.e5_embedder import E5Embedder
from llm.onnx_embedder import OnnxMiniLM
from llm.testing import FakeOpenAIServer
from memory.indexer import Indexer, IndexerConfig
from memory.ranking import Mode, RecallConfig, RecallQuery, _parts
from memory.recall_store import NAMES_NEWEST, SHORTLIST, PostgresRecall
from memory.store import PostgresFactStore
from tests.integration.history import T0, import_chat


@pytest.fixture
def small_embedder() -> Iterator[tuple[FakeOpenAIServer, str]]:
    server = FakeOpenAIServer(embed_dim=16)
    yield server, server.start()
    server.stop()


async def _count(engine: AsyncEngine, sql: str) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text(sql))).scalar() or 0)


async def test_imported_messages_are_indexed_in_batches_and_recalled_per_user(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    _, mine = await import_chat(engine, "t", "ana", [
        "My daughter's school play is on Friday at six",
        "Break a leg to her!",
        "Моя сестра живёт в Казани и работает врачом",
        "Здорово!",
        "Мій брат переїхав до Одеси минулого року",
        "Чудово.",
    ])
    await import_chat(engine, "t", "ben", ["Ben's daughter has a school play on Friday too"])
    indexer = Indexer(engine, minilm, minilm.name, IndexerConfig(batch_size=4))
    assert await indexer.drain_once() == 4  # a batch at a time
    assert await indexer.index_chat(uuid.uuid4())  # a chat with nothing queued
    assert await indexer.pending() == 3  # it took nothing of the others'
    while await indexer.drain_once():
        pass
    assert await _count(engine, "SELECT count(*) FROM recall_queue") == 0
    assert await _count(engine, "SELECT count(*) FROM message_embeddings") == 7

    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())

    async def top(query: str, mode: str = "hybrid", exclude: list[uuid.UUID] | None = None
                  ) -> list[str]:
        cfg = RecallConfig(mode=mode)  # type: ignore[arg-type]
        asked = RecallQuery("t", "ana", query, exclude=tuple(exclude or ()))
        result = await recall.recall(asked, cfg)
        return [i.text for i in result.items]

    assert (await top("when is the school performance?", "dense"))[0].startswith("My daughter")
    assert "Ben's daughter" not in " ".join(await top("daughter school play"))
    # Russian: the stemmer matches inflected forms; Ukrainian: a prefix catches the case.
    assert (await top("где работают сёстры", "keyword"))[0].startswith("Моя сестра")
    assert (await top("Одеса", "keyword"))[0].startswith("Мій брат")
    assert "My daughter" not in " ".join(await top("school play", exclude=mine[:1]))


async def test_reindex_moves_to_a_model_of_another_size_and_resumes_where_it_stopped(
    engine: AsyncEngine, minilm: OnnxMiniLM, database_url: str,
    small_embedder: tuple[FakeOpenAIServer, str],
) -> None:
    chat_id, _ = await import_chat(
        engine, "t", "ana", [f"message number {i} about topic {i % 3}" for i in range(12)])
    await Indexer(engine, minilm, minilm.name).index_chat(chat_id)
    facts = PostgresFactStore(engine, minilm, minilm.name)
    await facts.remember("t", "ana", ["Ana prefers window seats"], [])

    server, url = small_embedder
    server.embed_delay = 0.3  # the cancel below lands while the second batch is embedded
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
    assert done["parked"] == 0
    assert await _count(engine, "SELECT count(*) FROM recall_queue") == 0
    assert await _count(engine, "SELECT count(*) FROM message_embeddings "
                               "WHERE embedder = 'tiny-16' AND vector_dims(embedding) = 16") == 12
    assert await _count(engine, "SELECT count(*) FROM memories WHERE embedder = 'tiny-16'") == 1
    assert f"messages: {left}/{left} (100%)" in out.getvalue()
    async with engine.connect() as conn:  # rebuilt for the new size, still for ann users only
        definitions = (await conn.execute(text(
            "SELECT indexdef FROM pg_indexes WHERE indexname IN "
            "('message_embeddings_hnsw', 'memories_hnsw')"))).scalars().all()
        # Event memory's vectors take the new size too (every user's rows in their index).
        events = (await conn.execute(text(
            "SELECT attrelid::regclass::text, atttypmod FROM pg_attribute "
            "WHERE attrelid IN ('events'::regclass, 'entities'::regclass) "
            "AND attname = 'embedding' ORDER BY 1"))).all()
        event_indexes = (await conn.execute(text(
            "SELECT count(*) FROM pg_indexes WHERE indexname IN "
            "('events_hnsw', 'entities_hnsw')"))).scalar()
    assert len(definitions) == 2
    assert all("vector_cosine_ops" in d and d.endswith("WHERE ann") for d in definitions)
    assert [tuple(row) for row in events] == [("entities", 16), ("events", 16)]
    assert event_indexes == 2
    again = await reindex(settings, database_url, out=io.StringIO())
    assert again["messages"] == 0 and again["facts"] == 0


_AT_0002 = """
INSERT INTO chats (id, tenant_id, user_id) VALUES (:chat, 't', 'ana');
INSERT INTO messages (id, chat_id, position, kind, content, status) VALUES
    (:asked, :chat, 1, 'user', 'Where did I park?', 'complete'),
    (:answered, :chat, 2, 'assistant', 'On level 3.', 'complete'),
    (:cut, :chat, 3, 'assistant', 'On lev', 'interrupted'),
    (:failed, :chat, 4, 'assistant', '', 'failed'),
    (:empty, :chat, 5, 'user', '', 'complete'),
    (:tool, :chat, 6, 'tool', '{"level": 3}', 'complete'),
    (:summary, :chat, 7, 'summary', 'Ana parked on level 3.', 'complete');
INSERT INTO memories (id, tenant_id, user_id, text, normalized)
    VALUES (:fact, 't', 'ana', 'Ana parks on level 3.', 'ana parks on level 3');
"""


async def test_upgrading_to_0003_queues_the_history_and_marks_old_facts_as_the_flushs(
    empty_url: str,
) -> None:
    await asyncio.to_thread(migrate, empty_url, "0002")
    names = ("chat", "asked", "answered", "cut", "failed", "empty", "tool", "summary", "fact")
    ids = {name: uuid.uuid4() for name in names}
    db = create_engine(empty_url, pool_size=1)
    try:
        async with db.begin() as conn:
            for statement in _AT_0002.split(";"):
                if statement.strip():
                    await conn.execute(text(statement), ids)
        await asyncio.to_thread(migrate, empty_url)
        async with db.begin() as conn:
            queued = set((await conn.execute(text(
                "SELECT message_id, priority FROM recall_queue"))).all())
            await conn.execute(text(
                "INSERT INTO memories (id, tenant_id, user_id, text, normalized) "
                "VALUES (gen_random_uuid(), 't', 'ana', 'New.', 'new')"))
            origins = dict((await conn.execute(text("SELECT text, origin FROM memories"))).all())
            index = (await conn.execute(text(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'memories_current'"
            ))).scalar_one()
        # The user's and the assistant's words, interrupted ones too, as backfill.
        assert queued == {(ids["asked"], 1), (ids["answered"], 1), (ids["cut"], 1)}
        assert origins == {"Ana parks on level 3.": "flush", "New.": "tool"}
        assert "md5(normalized)" in index

        await asyncio.to_thread(downgrade, empty_url, "0002")
        async with db.connect() as conn:
            index = (await conn.execute(text(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'memories_current'"
            ))).scalar_one()
        assert "(tenant_id, user_id, normalized)" in index
    finally:
        await db.dispose()


async def test_a_long_fact_in_a_non_latin_script_is_written_twice_and_forgotten(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    # 2,000 CJK characters are 6,000 bytes: more than a btree entry holds (2,704).
    rng = random.Random(7)
    fact = "".join(chr(rng.randrange(0x4E00, 0x9FA5)) for _ in range(2000))
    facts = PostgresFactStore(engine, minilm, minilm.name)
    [first] = await facts.write("t", "ana", [fact], [], origin="tool")
    [second] = await facts.write("t", "ana", [fact], [uuid.uuid4()], origin="tool")
    assert (first.action, second.action) == ("added", "updated") and second.id == first.id
    assert [f.id for f in await facts.forget("t", "ana", text_=fact)] == [first.id]


async def test_the_statement_returns_the_candidates_the_ranking_puts_first(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    """Recall's statement scores its candidates as the ranking does and sends only the best: for
    a user with more candidates than that, in every mode and with either form of the statement,
    they are exactly the ones the ranking would have put first among all of them. The facts
    name messages as their sources, so the messages' ranks are expanded ones too."""
    topics = ["boat", "garden", "invoice", "flight", "piano", "kitchen"]
    lines = [f"the {topics[i % 6]} note {i}: the {topics[(i * 5) % 6]} plan and the budget"
             for i in range(70)]
    _, ids = await import_chat(engine, "t", "ana", lines)
    while await Indexer(engine, minilm, minilm.name).drain_once():
        pass
    facts = PostgresFactStore(engine, minilm, minilm.name)
    for i, t in enumerate(topics * 4):
        await facts.remember("t", "ana", [f"ana's {t} fact {i}: the plan"],
                             [ids[(i * 7) % 70], ids[(i * 11 + 3) % 70]])
    async with engine.begin() as conn:  # ages from today to a year back, importance 0.1-0.9
        await conn.execute(text(
            "UPDATE messages SET created_at = CAST(:t0 AS timestamptz) "
            "- make_interval(days => CAST((position / 1024 * 37) % 365 AS int)) "
            "WHERE chat_id IN (SELECT id FROM chats WHERE user_id = 'ana')"), {"t0": T0})
        await conn.execute(text(
            "UPDATE memories SET updated_at = CAST(:t0 AS timestamptz) "
            "- make_interval(days => (ascii(md5(text)) * 7) % 300), "
            "importance = 0.1 + (ascii(md5(text)) % 9) / 10.0 WHERE user_id = 'ana'"),
            {"t0": T0})
    dense_lists = {}
    for small in (False, True):
        recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())
        if small:
            await recall.recall(RecallQuery("t", "ana", "hello"))  # now known to be small
        for mode in ("hybrid", "dense", "keyword"):
            # No relevance floor: enough candidates for every cut (the floor is the lists').
            everything = RecallConfig(mode=mode, max_items=1000,  # type: ignore[arg-type]
                                      min_similarity=0.0, min_keyword=0.0,
                                      fact_expansion=True)
            query = "what was the garden and boat budget plan"
            vector = (await minilm.embed_query([query]))[0] if mode != "keyword" else None
            now = T0 + timedelta(days=3)
            every = await recall.candidates("t", "ana", query, vector, [], everything,
                                            now=now)
            ranked = sorted(every, key=lambda c: (-_parts(c, now, everything).total,
                                                  c.created_at, c.id))
            if mode == "dense":  # (distances have no ties here; full-text ranks do)
                dense_lists[small] = {(c.id, c.dense_rank) for c in every}
            for items in range(1, 15):  # each cut: every place of the order is checked
                cfg = replace(everything, max_items=items)
                best = await recall.candidates("t", "ana", query, vector, [], cfg, now=now)
                assert len(best) == SHORTLIST * items < len(every), (small, mode)
                assert ({c.id for c in best} == {c.id for c in ranked[: len(best)]}), (
                    small, mode, items)
    # Both forms find the same nearest messages and facts, in the same order; and messages
    # beyond the 30 nearest, through the facts drawn from them.
    assert dense_lists[True] == dense_lists[False] and len(dense_lists[True]) > 30 + 24


async def test_a_forgotten_or_superseded_fact_is_never_recalled_in_either_form(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    facts = PostgresFactStore(engine, minilm, minilm.name)
    await facts.remember("t", "bo", ["Bo's locker code is 4417", "Bo's bike is a red Cervelo.",
                                     "Bo parks on level 3 of the garage"], [])
    [locker] = [f for f in await facts.list("t", "bo") if "locker" in f.text]
    assert await facts.forget("t", "bo", fact_id=locker.id)
    # A close paraphrase supersedes the bike fact (memory/store.py).
    [new] = await facts.write("t", "bo", ["Bo's bike is a red Cervelo!"], [], origin="tool")
    assert new.action == "superseded"

    def fresh() -> PostgresRecall:
        return PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())

    knows = fresh()
    await knows.recall(RecallQuery("t", "bo", "hello"))  # from now on it knows Bo is small
    for form in ("for any user", "known to be small"):
        for mode in ("hybrid", "dense", "keyword"):
            cfg = RecallConfig(mode=mode)  # type: ignore[arg-type]
            texts = set()
            for query in ("locker code 4417", "Bo's bike Cervelo"):
                recall = knows if form == "known to be small" else fresh()
                texts |= {i.text for i in (await recall.recall(RecallQuery("t", "bo", query),
                                                               cfg)).items}
            assert "Bo's locker code is 4417" not in texts, (form, mode)
            assert "Bo's bike is a red Cervelo." not in texts, (form, mode)
            assert "Bo's bike is a red Cervelo!" in texts, (form, mode)


async def test_keyword_scores_are_bm25_over_the_users_rows_in_either_form(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    from memory.evaluation.baselines import bm25_scores

    # Every row holds a word of the query, so the matching rows are all of the user's rows and
    # their average length is the corpus's: the scores must be BM25's, to rounding, a row's
    # length being its distinct lexemes (the "garden" row repeats its word four times). Not indexed:
    # the rows are found by their full text alone (read-your-writes, migration 0011).
    docs = ["The garden shed needs a new roof before winter",
            "Garden tomatoes, garden beans, garden peas: the garden is full",
            "Booked a plumber for the roof leak on Monday",
            "A very long note about the weekend: we walked the dog, cooked, read, slept in, "
            "visited friends, and finally fixed the roof of the old garden shed",
            "The dog chewed the shed door"]
    await import_chat(engine, "t", "kim", docs)
    query = "garden roof shed"
    async with engine.connect() as conn:
        def lexemes(rows: list[tuple[str, list[int] | None]]) -> list[str]:
            return [lex for lex, at in rows for _ in range(len(at or [1]))]

        corpus = [lexemes([tuple(r) for r in (await conn.execute(text(
            "SELECT lexeme, positions FROM unnest(to_tsvector('jin_search', :t))"),
            {"t": d})).all()]) for d in docs]
        words = lexemes([tuple(r) for r in (await conn.execute(text(
            "SELECT lexeme, positions FROM unnest(to_tsvector('jin_search', :t))"),
            {"t": query})).all()])
    expected = dict(zip(docs, bm25_scores(words, corpus, unique_lengths=True), strict=True))
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())
    for form in ("for any user", "known to be small"):  # the first answer tells it kim is small
        found = await recall.search("t", "kim", query, mode="keyword", limit=10)
        got = {i.text: i.scores["keyword"] for i in found.items}
        assert set(got) == set(docs), form
        for doc, score in got.items():
            assert score == pytest.approx(expected[doc], abs=1e-3), (form, doc)
        by_rank = sorted(found.items, key=lambda i: i.scores["keyword_rank"] or 0)
        assert [i.text for i in by_rank] == sorted(docs, key=lambda d: -expected[d])
        assert [i.scores["keyword_rank"] for i in by_rank] == [1, 2, 3, 4, 5]


async def test_long_messages_are_kept_and_found_among_the_newest_keyword_matches(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    # A long answer's full-text vector (600 words: ~13 KB) is larger than an index entry can
    # hold: such rows are walked apart from the short ones (migration 0024), and the newest
    # matches are still the newest of all rows, long or short, in either form.
    def long(i: int) -> str:
        return "harbour " + " ".join(f"lex{i}q{k}" for k in range(600))

    lines = [long(i) if i % 3 == 2 else f"the harbour trip note {i}" for i in range(12)]
    _, ids = await import_chat(engine, "t", "sam", lines)
    assert await _count(engine, "SELECT count(*) FROM message_embeddings "
                                "WHERE user_id = 'sam'") == 12  # none left out
    for scan in (3, 5, 12):
        cfg = RecallConfig(keyword_scan=scan, min_keyword=0.0)
        recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), cfg)
        for form in ("for any user", "known to be small"):  # the first answer tells it
            found = await recall.search("t", "sam", "harbour", mode="keyword", limit=20)
            assert {i.id for i in found.items} == set(ids[-scan:]), (scan, form)
    found = await recall.search("t", "sam", "lex8q599", mode="keyword", limit=5)
    assert [i.id for i in found.items] == [ids[8]]


async def test_a_message_too_long_for_a_full_text_vector_is_kept_and_found_by_its_start(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    # 1 MB of short distinct words (a log pasted into a chat elsewhere, then imported) would
    # make a full-text vector over Postgres's 1 MB: its first 100,000 characters make it.
    words = [f"z{i:06x}" for i in range(150_000)]
    pasted = "harbourlog " + " ".join(words)
    _, ids = await import_chat(engine, "t", "pat", ["here is my log", pasted, "thanks"])
    while await Indexer(engine, minilm, minilm.name).drain_once():
        pass
    assert await _count(engine, "SELECT count(*) FROM message_embeddings WHERE user_id = 'pat' "
                                "AND embedding IS NOT NULL") == 3
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())
    for word, found in (("harbourlog", [ids[1]]), (words[1000], [ids[1]]), (words[-1], [])):
        result = await recall.search("t", "pat", word, mode="keyword", limit=5)
        assert [i.id for i in result.items] == found, word


async def test_keyword_search_finds_russian_and_ukrainian_inflected_forms(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    # Each row names a place or thing in one case; each query asks in another.
    rows = {
        "Ми жили у Львові два роки": ["Львів", "Львова", "Львовом"],
        "Переїхали до Києва навесні": ["Київ", "Києві", "Києвом"],
        "Квартира в Одесі біля моря": ["Одеса", "Одеси", "Одесу"],
        "Мій брат працює в Харкові": ["Харків", "Харкова"],
        "Бабуся пече пиріжки з вишнями": ["вишня", "вишні", "вишнею"],
        "Моя сестра живёт в Казани": ["Казань", "Казанью"],
        "Купили дачу под Москвой": ["Москва", "Москвы", "Москве"],
        "Он подарил ей книгу о кошках": ["кошка", "кошки", "кошкой", "книги"],
    }
    await import_chat(engine, "t", "lev", list(rows))
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig())
    missed = []
    for row, forms in rows.items():
        for form in forms:
            found = await recall.search("t", "lev", form, mode="keyword", limit=3)
            if not found.items or found.items[0].text != row:
                missed.append((form, [i.text for i in found.items]))
    assert not missed


async def test_a_message_is_found_through_the_current_facts_drawn_from_it_in_either_form(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    """Fact expansion: a turn that shares neither words nor meaning with the question is found
    through the fact the memory flush drew from it, and only through a current fact of the
    same user."""
    said = "Thursday evenings are hard now, my fingers ache and the neighbours must hate me."
    near = ["My cousin plays the guitar in a band", "The music shop sells old pianos cheaply",
            "We went to a violin concert on Friday", "Drums are too loud for a flat",
            "A friend of mine teaches the flute", "The orchestra played Brahms last night",
            "Saw a saxophone player in the metro", "My nephew wants a keyboard for his birthday",
            "That jazz trumpet solo was unreal", "Harps are so expensive, who knew"]
    _, ids = await import_chat(engine, "t", "ana", [*near[:5], said, *near[5:]])
    far = ids[5]
    while await Indexer(engine, minilm, minilm.name).drain_once():
        pass
    question = "Which instrument is Ana learning?"
    on = RecallConfig(candidates=5, max_items=5, fact_expansion=True)
    off = replace(on, fact_expansion=False)

    def fresh() -> PostgresRecall:
        return PostgresRecall(engine, minilm, lambda s: len(s.split()), on)

    knows = fresh()
    await knows.recall(RecallQuery("t", "ana", "hello"))  # from now on it knows Ana is small

    async def found(user: str, cfg: RecallConfig, **query: object) -> dict[uuid.UUID, str]:
        """Item id -> text, in both forms of the statement (which must agree)."""
        items = []
        for recall in (fresh(), knows):
            result = await recall.recall(RecallQuery("t", user, question, **query), cfg)
            items.append({i.id: i.text for i in result.items})
        assert items[0] == items[1]
        return items[0]

    assert far not in await found("ana", on)  # no fact yet: too far from the question
    # Another user's fact naming Ana's message expands nothing, for either of them.
    bo = PostgresFactStore(engine, minilm, minilm.name)
    await bo.remember("t", "bo", ["Ana is learning to play the cello"], [far])
    assert far not in await found("ana", on)
    assert far not in await found("bo", on)

    facts = PostgresFactStore(engine, minilm, minilm.name)
    # Written from the whole chat, as a flush of it would, the fact names all of it: no message
    # holds enough of its words ("plays" of a cousin's guitar is one of four): a key of none.
    [vague] = await facts.write("t", "ana", ["Ana is learning to play the cello"], ids,
                                origin="flush")
    assert set((await facts.get("t", "ana", vague.id)).sources) == set(ids)
    got = await found("ana", on)
    assert far not in got and vague.id in got
    assert await facts.forget("t", "ana", fact_id=vague.id)
    [fact] = await facts.write("t", "ana", ["Ana is learning to play the cello"], [far],
                               origin="flush")
    assert far in await found("ana", on)
    assert fact.id in await found("ana", on)  # the fact itself too
    assert far not in await found("ana", off)
    assert far not in await found("ana", on, exclude=(far,))  # the window shows it
    # A paraphrase supersedes the fact and inherits its sources: found through the new one.
    [new] = await facts.write("t", "ana", ["Ana is learning to play the cello!"], [],
                              origin="tool")
    assert new.action == "superseded"
    got = await found("ana", on)
    assert far in got and new.id in got and fact.id not in got
    assert await facts.forget("t", "ana", fact_id=new.id)
    assert far not in await found("ana", on)  # a forgotten fact is no key


async def test_a_question_that_names_the_user_finds_what_they_said_not_greetings_to_them(
    engine: AsyncEngine, e5: E5Embedder
) -> None:
    """A chat between two people: Anna's own lines never name her, the other side's greetings
    do. Asked about Anna, both lists search without the name its history is full of."""
    greetings = ["Hi Anna, long time! What's new with you?", "Hey Anna! Any plans for the weekend?",
                 "Evening, Anna. How was your week?", "Hi Anna! Seen anything good lately?",
                 "Hey Anna, still on for coffee sometime?"]
    lines = []
    for greeting in greetings:
        lines += ["Not much, just work.", greeting]
    lines += ["By the way: I turn thirty on the 23rd of October, thinking of a picnic by the lake.",
              "Sounds lovely!", "I went to see my friend Lisbeth in Porto.", "Nice."]
    # Small talk around it: "turn" in two more messages, long ones; short ones about nothing.
    lines += ["We waited for our turn at the old bakery on the corner for nearly an hour this "
              "morning, and the bread was sold out when we got in", "Oh no.",
              "It was my turn to cook yesterday so I tried that recipe with lentils and lemon "
              "from the market stall near the station", "Tasty?"]
    lines += [f"Small talk about the weather, part {i}." for i in range(30)]
    chat_id, _ = await import_chat(engine, "t", "anna", lines)
    await Indexer(engine, e5, e5.name).index_chat(chat_id)
    recall = PostgresRecall(engine, e5, lambda s: len(s.split()), RecallConfig())

    async def top(question: str, name_rows: int, mode: Mode = "dense") -> str:
        cfg = RecallConfig(mode=mode, min_similarity=-1.0, min_keyword=0.0,
                           name_rows=name_rows)
        result = await recall.recall(RecallQuery("t", "anna", question), cfg)
        return result.items[0].text

    question = "When does Anna turn a year older?"
    for mode in ("dense", "keyword"):  # (BM25 lifts the short greetings that hold the name)
        assert (await top(question, 4, mode)).startswith("By the way: I turn thirty"), mode
        assert await top(question, 0, mode) in greetings, mode  # as asked: a greeting first
    # A name the history holds fewer times than the bound is part of the question still.
    assert "Lisbeth" in await top("Whom did I visit, Lisbeth or Maria?", 4)


async def test_a_question_about_the_other_friend_finds_their_line_not_a_like_one_of_the_user(
    engine: AsyncEngine, e5: E5Embedder
) -> None:
    """A chat between two friends, imported: the user greets David, so David is the assistant
    side, and a question about David puts David's own line above the user's line about someone
    else that matches it better. A history that only speaks of someone tells no side."""
    lines: list[str] = []
    for greeting in ["Hey David!", "Hi David, long time!", "Evening, David.", "Thanks, David!",
                     "Hey David, how was the week?"]:
        lines += [greeting, "All good here, busy as always."]
    lines += ["My colleague is scared of spiders, she screamed at one in the office.", "Ha!",
              "Lol, poor her.", "Heights terrify me, I froze halfway across the glass bridge."]
    lines += ["Dinner tonight with my husband, Tom.", "Nice.", "My husband, Tom, says hi.",
              "Say hi to Tom!", "Lunch first. Tom, the kids and I.", "Fun.",
              "Tom is painting the shed.", "Busy man."]
    lines += [f"Small talk about the weather, part {i}." for i in range(20)]
    await Indexer(engine, e5, e5.name).index_chat((await import_chat(engine, "t", "sofia",
                                                                     lines))[0])
    recall = PostgresRecall(engine, e5, lambda s: len(s.split()), RecallConfig())
    question = "What is David afraid of?"

    async def top(cfg: RecallConfig) -> str:
        return (await recall.recall(RecallQuery("t", "sofia", question), cfg)).items[0].text

    for mode in ("dense", "hybrid"):
        cfg = RecallConfig(mode=mode, min_similarity=-1.0, min_keyword=0.0)
        assert (await top(replace(cfg, speaker_weight=1.0))).startswith("My colleague"), mode
        assert (await top(cfg)).startswith("Heights terrify me"), mode
    found = await recall.question("t", (await _chat_of(engine, "sofia")), question)
    assert found.about == "assistant"
    # Tom is spoken of, never addressed ("with my husband, Tom."): a question about him is
    # about nobody in particular.
    assert (await recall.question("t", await _chat_of(engine, "sofia"),
                                  "What is Tom painting?")).about is None


async def _chat_of(engine: AsyncEngine, user: str) -> uuid.UUID:
    async with engine.connect() as conn:
        return (await conn.execute(text("SELECT id FROM chats WHERE user_id = :u"),
                                   {"u": user})).scalar_one()


async def test_a_name_said_often_long_ago_is_left_out_as_one_said_often_lately(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    """The names are counted in the user's newest messages first, then, for a name held less
    there, in all of them: which names leave the question does not depend on when they were
    said, only on how often."""
    lines = [f"Hi Anna, how was day {i}?" for i in range(4)] + [
        f"Another ordinary thing, number {i}." for i in range(NAMES_NEWEST + 20)]
    chat_id, _ = await import_chat(engine, "t", "anna", lines)
    await Indexer(engine, minilm, minilm.name).index_chat(chat_id)
    asked: list[list[str]] = []

    class Recording:
        dim, symmetric = minilm.dim, False

        async def embed(self, texts: list[str]) -> list[list[float]]:
            return await minilm.embed(texts)

        async def embed_query(self, texts: list[str]) -> list[list[float]]:
            asked.append(texts)
            return await minilm.embed_query(texts)

    recall = PostgresRecall(engine, Recording(), lambda s: len(s.split()), RecallConfig())
    await recall.recall(RecallQuery("t", "anna", "When does Anna turn thirty?"))
    await recall.recall(RecallQuery("t", "anna", "Is Maria coming too?"))
    assert asked == [["When does turn thirty?"], ["Is Maria coming too?"]]


async def test_the_vector_handed_on_for_the_message_is_of_its_text_as_said(
    engine: AsyncEngine, minilm: OnnxMiniLM
) -> None:
    """An embedder that embeds questions and texts alike hands the question's vector on, for
    the indexer to store as the message's own: the text as the user said it, names and all, not
    the question the dense list searched with."""
    chat_id, _ = await import_chat(engine, "t", "anna", [
        line for i in range(5) for line in ("Fine.", f"Hi Anna, how was day {i}?")])
    await Indexer(engine, minilm, minilm.name).index_chat(chat_id)
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig(),
                            embedder_name=minilm.name)
    question = "When does Anna turn thirty?"
    result = await recall.recall(RecallQuery("t", "anna", question))
    assert result.text_vector is not None
    [said] = await minilm.embed([question])
    [searched] = await minilm.embed_query(["When does turn thirty?"])
    assert result.text_vector[1] == pytest.approx(list(said), abs=1e-6)
    assert result.text_vector[1] != pytest.approx(list(searched), abs=1e-3)

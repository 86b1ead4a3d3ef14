"""Event recall: what the events' lists and the keyword graph find, and what each adds to a
recall's latency.

    .venv/bin/python bench/event_recall.py [--users 12] [--fillers 40] [--sizes 0,1000,10000]
        [--messages 2000] [--runs 40]

Finding (the project's synthetic profiles, embedded by the built-in MiniLM): each of `--users`
users told the assistant ten lasting facts about themselves, each written as extraction writes
it: an event "profile_fact · topic: attribute: ...; value: ..." with the embedding of its text
and of the turn it came from ("Please call me Jazz from now on"), and its keywords (topic,
attribute, value: memory/events/keywords.py). Among them, `--fillers` discussion events of
other things. Each fact is then asked for in other words ("what should you call me?"), and the
fact's event is looked for among the recalled items: hit@1 and hit@5, with the keyword graph
and without it (the events' dense and keyword lists only), with the late-interaction rerank
(each event's token vectors packed as extraction packs them) and without.

Latency: one user with `--messages` messages (random vectors, as indexed) and each of `--sizes`
events (random vectors, three keywords each of a 2,000-word vocabulary); one recall of a
four-word question, timed at the client, `--runs` times each way alternately: events off
(messages and facts only), events without the graph, events with it, and with the rerank too
(each event with 20 random token vectors). p50 and p95 of each, and what the events' path, the
graph and the rerank add at p95. Figures only: it never passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from pgvector import Vector  # noqa: E402
from sqlalchemy import text  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from bench.harness import database  # noqa: E402
from chat.ports import ImportedMessage, NewChat  # noqa: E402
from chat.store import PostgresChatStore  # noqa: E402
from chat.types import ModelSettings  # noqa: E402
from db.engine import create_engine  # noqa: E402
from llm.onnx_embedder import OnnxMiniLM  # noqa: E402
from memory.events.keywords import event_keywords  # noqa: E402
from memory.late_interaction import pack  # noqa: E402
from memory.ranking import RecallConfig, RecallQuery  # noqa: E402
from memory.recall_store import PostgresRecall  # noqa: E402

T0 = datetime(2026, 6, 1, tzinfo=UTC)

# (topic, attribute, the turn that said it, the question that asks for it, values)
FACTS = [
    ("name", "nickname", "Please call me {v} from now on", "what should you call me?",
     ["Jazz", "Sparky", "Bee", "Doc", "Tiger", "Moss"]),
    ("home", "home city", "We finally moved to {v} last spring", "where do I live these days?",
     ["Lviv", "Porto", "Gdansk", "Tbilisi", "Leeds", "Lyon"]),
    ("work", "job", "I have been working as a {v} for six years", "what do I do for a living?",
     ["nurse", "welder", "pharmacist", "translator", "bus driver", "baker"]),
    ("pets", "dog", "My dog {v} chewed my shoes again", "how is my puppy called?",
     ["Rex", "Bublik", "Luna", "Max", "Pirate", "Toffee"]),
    ("health", "allergy", "I can't eat {v}, my throat swells up",
     "is there any food I have to stay away from?",
     ["peanuts", "shrimp", "kiwi", "sesame", "walnuts", "celery"]),
    ("dates", "birthday", "Don't forget, I turn a year older on {v}",
     "when should you congratulate me?",
     ["May 3", "June 12", "March 8", "October 1", "July 30", "January 5"]),
    ("exercise", "sport", "I go {v} every weekend to keep fit", "how do I stay in shape?",
     ["swimming", "bouldering", "cycling", "rowing", "running", "fencing"]),
    ("transport", "car", "I still drive my old {v} everywhere", "what vehicle do I own?",
     ["Skoda", "Lada", "Volvo", "Fiat", "Toyota", "Renault"]),
    ("family", "partner", "My wife {v} says hello", "who am I married to?",
     ["Olena", "Maria", "Iryna", "Sofia", "Anna", "Kateryna"]),
    ("languages", "native language", "At home we only speak {v}",
     "which tongue did I grow up with?",
     ["Ukrainian", "Polish", "Georgian", "Portuguese", "Romanian", "Czech"]),
]
FILLER_TOPICS = ["recursion", "sourdough", "tax forms", "kubernetes", "chess openings",
                 "watercolours", "gardening", "jazz history", "budget travel", "sql joins",
                 "sleep", "guitar chords", "climate", "football", "poetry", "photography"]

_EVENTS = text("""
INSERT INTO events (id, tenant_id, user_id, type, topic, properties, summary, embedding,
                    segment_embedding, embedder, started_at, ended_at, tokens)
SELECT id, 't', :u, type, topic, '{}'::jsonb, summary, v, sv, 'bench', at, at, tokens
FROM unnest(CAST(:ids AS uuid[]), CAST(:types AS text[]), CAST(:topics AS text[]),
            CAST(:summaries AS text[]), CAST(:vs AS vector[]), CAST(:svs AS vector[]),
            CAST(:ats AS timestamptz[]), CAST(:tokens AS bytea[]))
     AS e(id, type, topic, summary, v, sv, at, tokens)""")
_LINKS = text("""
INSERT INTO event_keyword_links (tenant_id, user_id, keyword, event_id)
SELECT 't', :u, k, e FROM unnest(CAST(:keywords AS text[]), CAST(:ids AS uuid[])) AS x(k, e)
ON CONFLICT DO NOTHING""")
# The indexer's rows for the user's messages, with random unit-less vectors (cosine ignores
# their length): `--messages` of them for the latency part.
_INDEXED = text("""
INSERT INTO message_embeddings (message_id, chat_id, tenant_id, user_id, embedding, content_tsv,
                                embedder, created_at, position, ann)
SELECT m.id, m.chat_id, 't', :u,
       (SELECT CAST(array_agg(random() - 0.5) AS vector) FROM generate_series(1, :dim) g
        WHERE m.id IS NOT NULL),  -- (correlated: a vector of its own for each row)
       recall_text_vector(m.content), 'bench', m.created_at, m.position, false
FROM messages m WHERE m.chat_id = :chat
ON CONFLICT DO NOTHING""")


async def _write(engine: AsyncEngine, user: str, rows: list[dict[str, object]]) -> None:
    """Events as extraction writes them: the rows, then their keyword links (the trigger of
    migration 0020 makes the keywords and their means)."""
    for start in range(0, len(rows), 2000):
        part = rows[start:start + 2000]
        links = [(k, r["id"]) for r in part for k in r["keywords"]]  # type: ignore[attr-defined]
        async with engine.begin() as conn:
            await conn.execute(_EVENTS, {
                "u": user, "ids": [r["id"] for r in part], "types": [r["type"] for r in part],
                "topics": [r["topic"] for r in part],
                "summaries": [r["summary"] for r in part],
                "vs": [Vector(r["v"]) for r in part], "svs": [Vector(r["sv"]) for r in part],
                "ats": [r["at"] for r in part], "tokens": [r["tokens"] for r in part]})
            await conn.execute(_LINKS, {"u": user, "keywords": [k for k, _ in links],
                                        "ids": [i for _, i in links]})


async def finding(engine: AsyncEngine, minilm: OnnxMiniLM, users: int, fillers: int,
                  rng: random.Random) -> None:
    asked: list[tuple[str, str, uuid.UUID]] = []  # user, question, the fact's event
    for n in range(users):
        user = f"find{n}"
        rows: list[dict[str, object]] = []
        for topic, attribute, said, question, values in FACTS:
            value = values[n % len(values)]
            props = {"attribute": attribute, "value": value}
            rows.append({"type": "profile_fact", "topic": topic, "props": props,
                         "summary": f"profile_fact · {topic}: attribute: {attribute}; "
                                    f"value: {value}", "segment": said.format(v=value)})
            asked.append((user, question, rows[-1]))  # type: ignore[arg-type]
        for _ in range(fillers):
            topic = rng.choice(FILLER_TOPICS)
            other = rng.sample(FILLER_TOPICS, 2)
            words = [topic, *other]
            rows.append({"type": "discussion", "topic": topic,
                         "props": {"summary": f"talked about {topic} and {other[0]}",
                                   "keywords": words},
                         "summary": f"discussion · {topic}: summary: talked about {topic} "
                                    f"and {other[0]}; keywords: {', '.join(words)}",
                         "segment": f"Can you explain {topic}? I keep mixing it up with "
                                    f"{other[0]} and {other[1]}."})
        vectors = await minilm.embed([str(r["summary"]) for r in rows]
                                     + [str(r["segment"]) for r in rows])
        tokens = await minilm.token_vectors([str(r["summary"]) for r in rows])
        for i, r in enumerate(rows):
            r.update(id=uuid.uuid4(), v=vectors[i], sv=vectors[len(rows) + i],
                     tokens=pack(tokens[i]),
                     at=T0 + timedelta(hours=rng.randrange(24 * 90)),
                     keywords=event_keywords(str(r["topic"]), r["props"], None))  # type: ignore
        await _write(engine, user, rows)
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig(),
                            token_embedder=minilm)
    ways = {"events, graph off": replace(recall.config, graph=False),
            "events with the graph": recall.config,
            "graph and rerank": replace(recall.config, rerank=True),
            "rerank, graph off": replace(recall.config, rerank=True, graph=False),
            "the graph's list alone": replace(recall.config, dense_weight=0.0,
                                               keyword_weight=0.0)}
    print(f"finding: {users} users x {len(FACTS)} facts among {fillers} other events each; "
          f"each fact asked in other words ({len(asked)} questions)")
    for name, cfg in ways.items():
        hit1 = hit5 = 0
        for user, question, row in asked:
            items = (await recall.recall(RecallQuery("t", user, question), cfg)).items
            ids = [i.id for i in items]
            hit1 += ids[:1] == [row["id"]]  # type: ignore[index]
            hit5 += row["id"] in ids[:5]  # type: ignore[index]
        print(f"  {name:24} hit@1 {hit1 / len(asked):.3f}   hit@5 {hit5 / len(asked):.3f}")


async def latency(engine: AsyncEngine, minilm: OnnxMiniLM, sizes: list[int], messages: int,
                  runs: int, rng: random.Random) -> None:
    vocabulary = [f"kw{i}" for i in range(2000)]
    dim = minilm.dim
    recall = PostgresRecall(engine, minilm, lambda s: len(s.split()), RecallConfig(),
                            token_embedder=minilm)
    ways = {"events off": replace(recall.config, events=False),
            "events, no graph": replace(recall.config, graph=False),
            "events + graph": recall.config,
            "+ rerank": replace(recall.config, rerank=True)}
    print(f"latency: one user, {messages} messages, a recall of a four-word question "
          f"({runs} runs each way, alternated; ms at the client)")
    print(f"  {'events':>7} " + " ".join(f"{w:>22}" for w in ways)
          + "   events add p95   graph adds p95   rerank adds p95")
    for size in sizes:
        user = f"lat{size}"
        chats = PostgresChatStore(engine)
        chat = await chats.create_chat(NewChat("t", user, "", "", ModelSettings(), "queue"))
        lines = [ImportedMessage("user" if i % 2 == 0 else "assistant",
                                 " ".join(rng.sample(vocabulary, 8)), 10,
                                 T0 + timedelta(minutes=i)) for i in range(messages)]
        await chats.import_messages("t", chat.id, lines)
        async with engine.begin() as conn:
            await conn.execute(_INDEXED, {"u": user, "chat": chat.id, "dim": dim})
            await conn.execute(text("ANALYZE"))
        rows = []
        for _ in range(size):
            draw = np.random.default_rng(rng.randrange(2**32))
            v = draw.standard_normal(dim)
            words = rng.sample(vocabulary, 3)
            pieces = draw.standard_normal((20, dim))  # a 20-token text's vectors
            pieces /= np.linalg.norm(pieces, axis=1, keepdims=True)
            rows.append({"id": uuid.uuid4(), "type": "discussion", "topic": words[0],
                         "summary": f"discussion · {words[0]}: keywords: {', '.join(words)}",
                         "v": v.astype(np.float32), "sv": v.astype(np.float32),
                         "at": T0 + timedelta(minutes=rng.randrange(100_000)),
                         "keywords": words, "tokens": pack(pieces)})
        if rows:
            await _write(engine, user, rows)
        async with engine.begin() as conn:
            await conn.execute(text("ANALYZE"))
        times: dict[str, list[float]] = {w: [] for w in ways}
        for n in range(runs + 3):
            question = " ".join(rng.sample(vocabulary, 4))
            for name, cfg in ways.items():
                started = time.perf_counter()
                await recall.recall(RecallQuery("t", user, question), cfg)
                if n >= 3:  # the first runs warm the plan cache and the model
                    times[name].append((time.perf_counter() - started) * 1000)
        p = {w: (statistics.median(t), statistics.quantiles(t, n=20)[-1])
             for w, t in times.items()}
        cells = " ".join(f"{f'{a:.1f} / {b:.1f}':>22}" for a, b in p.values())
        base, events, graph, late = (p[w][1] for w in ways)
        print(f"  {size:>7} {cells}   {events - base:+13.1f}   {graph - events:+13.1f}"
              f"   {late - graph:+14.1f}")


async def measure(url: str, args: argparse.Namespace) -> None:
    engine = create_engine(url, pool_size=5)
    minilm = OnnxMiniLM()
    rng = random.Random(7)
    try:
        await finding(engine, minilm, args.users, args.fillers, rng)
        await latency(engine, minilm, [int(s) for s in args.sizes.split(",")], args.messages,
                      args.runs, rng)
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=12)
    parser.add_argument("--fillers", type=int, default=40)
    parser.add_argument("--sizes", default="0,1000,10000")
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    with ExitStack() as stack:
        asyncio.run(measure(database(stack), args))


if __name__ == "__main__":
    main()

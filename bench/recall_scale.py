"""Recall at scale: the production recall statement over ~1.3M messages of many users.

    python -m bench.recall_scale --sizes 10000,100000,1000000 --small-users 2000 --queries 200 \\
        --datadir /tmp/jin_scale_text --no-copy
    python -m bench.recall_scale --sizes 10000,100000 --datadir /tmp/jin_scale_text     # quick

The table of the migrations holds a user of each of --sizes and --mid-sizes rows and
--small-users users of 100 rows, spread over --tenants tenants, their rows interleaved in time as
traffic leaves them. Vectors are synthetic and clustered: 200 topics x 20 subtopics, a row is a
subtopic plus noise, unit length; queries are drawn the same way. Every message has a text
(Vocabulary: 4-10 words of a Zipf law over 3,000 words, and 1-2 words of its vector's topic),
its full text written from it by the indexer's own statement; each query comes with a question
of four words (one common, one middling, one rare, one of its topic) and one of two middling
words only (Vocabulary.middling). For each measured user, the
dense list of memory/recall_store.py (taken from its statement) runs on jin's engine (iterative HNSW
scans), planned for its parameters as recall's form for any user is: as the planner chooses,
then with the plan forced each way: exact (the owner index and a sort, what a per-user filter
costs without a vector index) and HNSW. It
prints p50/p95 at the client, exact/production ratios, recall@k against exact (k is
RecallConfig.candidates unless --candidates), EXPLAIN (ANALYZE, BUFFERS) per user, the table and
index sizes and the HNSW build time; small users must get min(k, rows) rows back. Beside
them, the whole statement recall runs (`PostgresRecall.candidates`): dense only, and hybrid
with either question (both lists, messages and facts), with EXPLAIN (ANALYZE, BUFFERS) of the
slowest question as recall sent it. Then
experiments, each undone or kept apart from the migrated table: higher hnsw.ef_search values,
extended statistics on the owner columns, and the same rows copied into another layout
(--copy-partitions: 0, the default, is one unpartitioned table; N is N hash partitions by owner).
Never passes or fails on time.

The embedded Postgres lives in --datadir and keeps the loaded database (and the copy): a later
run of the same layout measures without loading (--fresh loads anew, as it must after a
migration changes). The HNSW and full-text indexes are dropped for the bulk load and built
afterwards; those builds are the times reported.

This module runs past the ~400 lines of STYLE.md: it is one benchmark, read top to bottom, with
its loader, its experiments and its report; split up it would only scatter the figures' origin.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import migrate
from db.engine import create_engine
from db.statements import Connection, connect, fetch, positional
from memory.indexer import IndexerConfig
from memory.ranking import Mode, RecallConfig

DIM = 384
SMALL_ROWS = 100
CHAT_ROWS = 500  # messages per synthetic chat
CHUNK = 25_000  # rows per load statement
WARMUP_S = 10.0  # per user and plan: an untimed pass over the measured queries
PEER = {10_000: (8.0, 21.0)}  # mem0 on pgvector, this machine (issue #4): p50, p95 in ms


def _dense_lists() -> tuple[TextClause, TextClause]:
    """The dense lists over messages (`dm`) of memory/recall_store.py, its own texts, so that this
    benchmark measures what recall runs today: the form that serves any user (the HNSW index
    for the rows in it, an exact scan for the others) and the one for users known to be small."""
    from memory.hnsw_membership import nearest
    from memory.recall_store import _DENSE_SPLIT, _RECALLABLE

    # The small users' form reads their rows once for both lists (`for_small_users`); its dense
    # list is this exact scan of them.
    return text(_DENSE_SPLIT), text(nearest("message_id", "message_embeddings", _RECALLABLE,
                                            ":qv", ":n", indexed=False))


DENSE, DENSE_SMALL = _dense_lists()
COPIED = text(str(DENSE).replace("FROM message_embeddings", "FROM bench_copy"))

Settings = tuple[tuple[str, str], ...]
# Session settings that force a plan. PG 18's enable_indexscan=off also disables index-only
# scans: what is left is a bitmap scan of the owner index (or a seq scan), then a sort.
EXACT: Settings = (("enable_indexscan", "off"),)
HNSW: Settings = (("enable_sort", "off"),)  # the HNSW index is the one path without a sort


@dataclass(frozen=True)
class Owner:
    tenant: str
    user: str
    rows: int


@dataclass(frozen=True)
class Layout:
    sizes: tuple[int, ...]
    mid_sizes: tuple[int, ...]
    small_users: int
    tenants: int
    seed: int

    def measured(self) -> list[Owner]:
        """One user per size, smallest first, each in a tenant it shares with small users."""
        sizes = sorted(self.mid_sizes + self.sizes)
        return [Owner(f"tenant-{i % self.tenants}", f"u{n}", n) for i, n in enumerate(sizes)]

    def small(self) -> list[Owner]:
        return [
            Owner(f"tenant-{j % self.tenants}", f"user-{j:05d}", SMALL_ROWS)
            for j in range(self.small_users)
        ]

    @property
    def rows(self) -> int:
        return sum(self.sizes) + sum(self.mid_sizes) + self.small_users * SMALL_ROWS

    @property
    def database(self) -> str:
        sizes = "_".join(str(n) for n in self.sizes)
        mids = "_".join(str(n) for n in self.mid_sizes)
        # (_zipf: rows with the text of Vocabulary; a database loaded before it is not reused.)
        return (f"scale_{sizes}_m{mids}_{self.small_users}x{SMALL_ROWS}_t{self.tenants}"
                f"_s{self.seed}_zipf")


class Clusters:
    """Unit vectors around 200 topics x 20 subtopics: neighbours are near, not all alike."""

    def __init__(self, seed: int, topics: int = 200, subtopics: int = 20) -> None:
        rng = np.random.default_rng([seed, 0])
        centres = _unit(rng.standard_normal((topics, DIM), dtype=np.float32))
        parents = np.repeat(centres, subtopics, axis=0)
        self.subtopics = _unit(parents + 0.7 * _noise(rng, len(parents)))
        self.topics, self.per_topic = topics, subtopics

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """n vectors and the topic of each (what its text's topic words are drawn from)."""
        picked = rng.integers(0, len(self.subtopics), n)
        return _unit(self.subtopics[picked] + 0.6 * _noise(rng, n)), picked // self.per_topic


class Vocabulary:
    """Words for synthetic text: COMMON words drawn by a Zipf law (the commonest in ~60% of rows,
    the 100th in ~1%, the rarest in ~0.03%: full text's long tail, stop words apart), and
    TOPIC_WORDS words per topic of the vectors, so that a row's text and its vector agree.
    Made-up syllables (consonant + a, o or u) that the English stemmer leaves whole."""

    COMMON, TOPIC_WORDS, ZIPF_S = 3000, 5, 1.0

    def __init__(self, seed: int, topics: int) -> None:
        rng = np.random.default_rng([seed, 4])
        syllables = [c + v for c in "bdfgklmnprstvz" for v in "aou"]
        picked = rng.choice(len(syllables) ** 3, self.COMMON + topics * self.TOPIC_WORDS,
                            replace=False)
        n = len(syllables)
        words = [syllables[i // n // n] + syllables[i // n % n] + syllables[i % n]
                 for i in picked.tolist()]
        self.common = np.array(words[: self.COMMON])
        self.topical = np.array(words[self.COMMON:]).reshape(topics, self.TOPIC_WORDS)
        weights = 1 / np.arange(1, self.COMMON + 1) ** self.ZIPF_S
        self.p = weights / weights.sum()

    def sentences(self, rng: np.random.Generator, topics: np.ndarray) -> list[str]:
        """A text per topic: 4-10 Zipf words and 1-2 of the topic's words, shuffled."""
        n = len(topics)
        common = self.common[rng.choice(self.COMMON, (n, 10), p=self.p)]
        lengths = rng.integers(4, 11, n)
        topical = self.topical[topics[:, None], rng.integers(0, self.TOPIC_WORDS, (n, 2))]
        topical_count = rng.integers(1, 3, n)
        out = []
        for i in range(n):
            words = [*common[i, : lengths[i]], *topical[i, : topical_count[i]]]
            rng.shuffle(words)
            out.append(" ".join(words))
        return out

    def question(self, rng: np.random.Generator, topic: int) -> str:
        """A question of a few words: one of the 10 commonest, one of ranks 10-300, one rarer,
        and one of the topic's words."""
        common, mid, rare = (self.common[rng.integers(lo, hi)]
                             for lo, hi in ((0, 10), (10, 300), (300, self.COMMON)))
        words = [common, mid, rare, self.topical[topic, rng.integers(0, self.TOPIC_WORDS)]]
        rng.shuffle(words)
        return f"what did I say about {words[0]} {words[1]} and {words[2]} {words[3]}?"

    def middling(self, rng: np.random.Generator) -> str:
        """A question of two words of ranks 10-300 only (in ~0.3-6% of rows each): too many
        matches to read them all in a large user, too few to find the newest quickly."""
        first, second = (self.common[rng.integers(10, 300)] for _ in range(2))
        return f"where was the {first} {second}?"


def _noise(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.standard_normal((n, DIM), dtype=np.float32) / np.float32(np.sqrt(DIM))


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def owner_ranks(owner_of_row: np.ndarray, n_owners: int) -> np.ndarray:
    """For each row, how many rows of its owner come before it (its place in the owner's life)."""
    order = np.argsort(owner_of_row, kind="stable")
    counts = np.bincount(owner_of_row, minlength=n_owners)
    starts = np.cumsum(counts) - counts
    ranks = np.empty_like(owner_of_row)
    ranks[order] = np.arange(len(owner_of_row)) - np.repeat(starts, counts)
    return ranks


def chat_id(owner: int, chat: int) -> uuid.UUID:
    return uuid.UUID(int=(0xBE7C << 112) | (owner << 32) | chat)


def pair(ms: list[float]) -> str:
    p50, p95 = np.percentile(ms, [50, 95])
    return f"{p50:.2f} / {p95:.2f}"


def median(ms: list[float]) -> float:
    return float(np.percentile(ms, 50))


def recall_at(found: list[list[Any]], truth: list[list[Any]]) -> float:
    hits = sum(len(set(f) & set(t)) for f, t in zip(found, truth, strict=True))
    return hits / max(1, sum(len(t) for t in truth))


def quality(found: Run, truth: Run) -> str:
    """recall@40, the queries lost (recall under 0.5: the search ended in another cluster), and
    how much farther on average the rows found are than the true nearest (a recall below 1 at
    +0.1% is a near-tie)."""
    lost = sum(len(set(f) & set(t)) < len(t) / 2 for f, t in zip(found.ids, truth.ids, strict=True))
    ratios = [np.mean(f) / np.mean(t)
              for f, t in zip(found.distances, truth.distances, strict=True) if f and t]
    return (f"{recall_at(found.ids, truth.ids):.3f}, {lost} lost, "
            f"+{(np.mean(ratios) - 1) * 100:.1f}%")


def plan_name(plan: str) -> str:
    """'HNSW' or 'exact (...)', with the planner's estimate of the owner's rows."""
    scan = next(line for line in plan.splitlines()
                if "Scan" in line and "Limit" not in line and "recall_owners" not in line)
    estimate = re.search(r"rows=(\d+)", scan)
    rows = f", est. {int(estimate.group(1)):,} rows" if estimate else ""
    if "Order By: (embedding <=>" in plan:
        return "HNSW" + rows
    return ("exact: seq scan" if "Seq Scan" in scan else "exact: owner index") + rows


# --- the server and the load -------------------------------------------------------------------


def start_server(datadir: Path, shared_buffers: str) -> Any:
    """The embedded Postgres, restarted once if shared_buffers must change (a restart setting)."""
    import pgserver
    from pgserver._commands import pg_ctl  # pgserver has no public restart

    server = pgserver.get_server(datadir, cleanup_mode=None)
    if server.psql("SHOW shared_buffers;").split("\n")[2].strip() != shared_buffers:
        server.psql(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}';")
        server.psql("ALTER SYSTEM SET max_wal_size = '8GB';")  # no checkpoint storm while loading
        pg_ctl(["-w", "-l", str(server.log), "restart"], pgdata=datadir, user=server.system_user)
    return server


async def _connect(url: str, vectors: bool = True) -> Any:
    import asyncpg
    from pgvector.asyncpg import register_vector

    conn = await asyncpg.connect(url)
    if vectors:
        await register_vector(conn)
    return conn


async def database_state(server_url: str, layout: Layout, fresh: bool) -> dict[str, float] | None:
    """The load figures of a complete earlier load of this layout, else None (database reset)."""
    conn = await _connect(server_url, vectors=False)
    try:
        note = await conn.fetchval(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1",
            layout.database,
        )
        if note and not fresh:
            return json.loads(note)
        await conn.execute(f"DROP DATABASE IF EXISTS {layout.database}")
        await conn.execute(f"CREATE DATABASE {layout.database}")
        return None
    finally:
        await conn.close()


async def load(url: str, server_url: str, layout: Layout) -> dict[str, float]:
    """Chats, messages and embeddings in chunks, then the HNSW and full-text indexes; returns
    the timings."""
    conn = await _connect(url)
    await conn.execute("SET synchronous_commit = off")
    # Built after the load, as a bulk load would: with the full-text index kept up row by row,
    # the load's average rate fell from ~6,700 to ~3,800 rows/s by 314,000 rows.
    hnsw, tsv = [_whole(await conn.fetchval(f"SELECT pg_get_indexdef('{name}'::regclass)"))
                 for name in ("message_embeddings_hnsw", "message_embeddings_tsv")]
    await conn.execute("DROP INDEX message_embeddings_hnsw, message_embeddings_tsv")
    owners = layout.measured() + layout.small()
    # Each user counted as the indexer would have by the end, so that every row is written
    # in or out of the HNSW index as its user's would be (memory/indexer.py `ann_from`).
    ann_from = IndexerConfig().ann_from
    await conn.copy_records_to_table(
        "recall_owners", columns=["tenant_id", "user_id", "messages", "ann"],
        records=[(o.tenant, o.user, o.rows, o.rows >= ann_from) for o in owners])
    await conn.copy_records_to_table("chats", columns=["id", "tenant_id", "user_id"], records=[
        (chat_id(i, c), o.tenant, o.user) for i, o in enumerate(owners)
        for c in range(-(-o.rows // CHAT_ROWS))
    ])
    rng = np.random.default_rng([layout.seed, 1])
    owner_of_row = rng.permutation(np.repeat(
        np.arange(len(owners), dtype=np.int64), [o.rows for o in owners]
    ))
    ranks = owner_ranks(owner_of_row, len(owners))
    clusters, started = Clusters(layout.seed), time.perf_counter()
    vocabulary = Vocabulary(layout.seed, clusters.topics)
    for lo in range(0, layout.rows, CHUNK):
        hi = min(lo + CHUNK, layout.rows)
        await _load_chunk(conn, clusters, vocabulary, rng, owner_of_row[lo:hi], ranks[lo:hi], lo,
                          layout.rows)
        rate = hi / (time.perf_counter() - started)
        print(f"  loaded {hi:>10,} / {layout.rows:,} rows  {rate:,.0f} rows/s", flush=True)
    loaded = time.perf_counter() - started
    await conn.execute("SET maintenance_work_mem = '8GB'")
    await conn.execute("SET max_parallel_maintenance_workers = 1")
    print("  building the HNSW index ...", flush=True)
    started = time.perf_counter()
    await conn.execute(hnsw)
    built = time.perf_counter() - started
    started = time.perf_counter()
    await conn.execute(tsv)
    built_tsv = time.perf_counter() - started
    for table in ("chats", "messages", "message_embeddings"):
        await conn.execute(f"VACUUM (ANALYZE) {table}")
    await conn.execute("CHECKPOINT")
    await conn.close()
    facts = {"load_s": loaded, "rows_per_s": layout.rows / loaded, "hnsw_build_s": built,
             "tsv_build_s": built_tsv}
    conn = await _connect(server_url, vectors=False)
    await conn.execute(f"COMMENT ON DATABASE {layout.database} IS '{json.dumps(facts)}'")
    await conn.close()
    return facts


def _whole(index_definition: str) -> str:
    """An index definition that builds on every partition: a partitioned parent's says ON ONLY."""
    return index_definition.replace(" ON ONLY ", " ON ")


_FIRST = datetime(2025, 1, 1, tzinfo=UTC)


async def _load_chunk(
    conn: Any, clusters: Clusters, vocabulary: Vocabulary, rng: np.random.Generator,
    owners: np.ndarray, ranks: np.ndarray, first_row: int, total_rows: int,
) -> None:
    """Messages by COPY, then their embeddings by memory/indexer.py's own statement; a year of
    traffic, row i at i/total_rows of it."""
    from pgvector import Vector

    from memory.indexer import _WRITE

    step = timedelta(days=365) / total_rows
    ids = [uuid.UUID(bytes=rng.bytes(16)) for _ in range(len(owners))]
    vectors, topics = clusters.sample(rng, len(owners))
    texts = vocabulary.sentences(rng, topics)
    records = [
        (ids[i], chat_id(int(owner), int(rank) // CHAT_ROWS), int(rank) % CHAT_ROWS,
         ("user", "assistant")[int(rank) % 2], texts[i], _FIRST + step * (first_row + i))
        for i, (owner, rank) in enumerate(zip(owners, ranks, strict=True))
    ]
    await conn.copy_records_to_table(
        "messages", columns=["id", "chat_id", "position", "kind", "content", "created_at"],
        records=records,
    )
    # Their full text is the messages' own: the indexer's statement reads the content it stores.
    params = {"ids": ids, "vectors": [Vector(v) for v in vectors], "embedder": "synthetic"}
    sql, names = positional(str(_WRITE))
    await conn.execute(sql, *(params[name] for name in names))


# --- measuring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    ms: list[float]
    ids: list[list[uuid.UUID]]
    distances: list[list[float]]


@dataclass(frozen=True)
class Queries:
    """Query vectors (vector i asks owners[i % len(owners)]) and their exact answers; a question
    per vector, of words of its topic and of the Zipf vocabulary (Vocabulary.question)."""

    owners: list[Owner]
    vectors: np.ndarray
    questions: list[str]
    middling: list[str]  # Vocabulary.middling
    k: int  # the length of the dense list (RecallConfig.candidates)
    exact: Run

    @property
    def owner(self) -> Owner:
        return self.owners[0]


def _params(owner: Owner, vector: np.ndarray, k: int) -> dict[str, Any]:
    """As memory/recall_store.py binds them for a dense recall with nothing excluded or hidden."""
    from pgvector import Vector

    return {"qv": Vector(vector), "t": owner.tenant, "u": owner.user, "n": k, "exclude": [],
            "dense": True, "hide_chat": None, "hide_before": None, "shown_chat": None,
            "shown_from": None, "shown_at": None}


async def _set(conn: Connection, settings: Settings, reset: bool = False) -> None:
    # Every statement planned for its parameters, as recall's form for any user is
    # (memory/recall_store.py).
    for name, value in (("plan_cache_mode", "force_custom_plan"), *settings):
        await conn.raw.execute(f"RESET {name}" if reset else f"SET {name} = {value}")


async def run(
    engine: AsyncEngine, statement: TextClause, owners: list[Owner], vectors: np.ndarray, k: int,
    settings: Settings = (),
) -> Run:
    """One query per vector (owners[i % len(owners)]), timed at the client. The same queries run
    once untimed before (up to WARMUP_S): the figures are for pages in shared_buffers, as on a
    server sized for its table, not for a graph read from disk by the benchmark's first pass."""
    ms: list[float] = []
    ids: list[list[uuid.UUID]] = []
    distances: list[list[float]] = []
    async with connect(engine) as conn:
        await _set(conn, settings)
        try:
            deadline = time.perf_counter() + WARMUP_S
            for i, vector in enumerate(vectors):
                await fetch(conn, statement, _params(owners[i % len(owners)], vector, k))
                if time.perf_counter() > deadline:
                    break
            for i, vector in enumerate(vectors):
                started = time.perf_counter()
                rows = await fetch(conn, statement, _params(owners[i % len(owners)], vector, k))
                ms.append((time.perf_counter() - started) * 1000)
                ids.append([row["message_id"] for row in rows])
                distances.append([row["d"] for row in rows])
        finally:
            await _set(conn, settings, reset=True)
    return Run(ms, ids, distances)


async def explain(
    engine: AsyncEngine, statement: TextClause, owner: Owner, vector: np.ndarray, k: int,
    settings: Settings = (),
) -> str:
    async with connect(engine) as conn:
        await _set(conn, settings)
        rows = await fetch(conn, text(f"EXPLAIN (ANALYZE, BUFFERS) {statement}"),
                           _params(owner, vector, k))
        await _set(conn, settings, reset=True)
    # The query vector's 384 numbers say nothing about the plan.
    return re.sub(r"'\[[^\]]*\]'::vector", "'[...]'::vector", "\n".join(r[0] for r in rows))


async def candidates_ms(
    engine: AsyncEngine, q: Queries, mode: Mode, questions: list[str] | None = None,
) -> list[float]:
    """The whole candidate statement recall runs (memory/recall_store.py `candidates`): in
    "dense" mode with no question, or in "hybrid" mode (both lists) with query i's question."""
    from memory.recall_store import PostgresRecall

    cfg = RecallConfig(mode=mode, candidates=q.k)
    recall = PostgresRecall(engine, None, len, cfg)  # type: ignore[arg-type]  # no embedding here
    asked = (questions or q.questions) if mode != "dense" else [""] * len(q.vectors)
    for question, vector in list(zip(asked, q.vectors, strict=True))[:20]:
        await recall.candidates(q.owner.tenant, q.owner.user, question, vector, [], cfg)
    ms = []
    for question, vector in zip(asked, q.vectors, strict=True):
        started = time.perf_counter()
        await recall.candidates(q.owner.tenant, q.owner.user, question, vector, [], cfg)
        ms.append((time.perf_counter() - started) * 1000)
    return ms


async def scans_side_by_side(engine: AsyncEngine, q: Queries, scans: list[int]) -> list[str]:
    """The hybrid statement with each `keyword_scan` (how many of the newest full-text matches
    BM25 ranks), question by question in turn, so that every value meets the same load: one
    table row per kind of question."""
    from memory.recall_store import PostgresRecall

    rows = []
    for kind, asked in (("a question", q.questions), ("two middling words", q.middling)):
        ms: dict[int, list[float]] = {scan: [] for scan in scans}
        configs = {scan: RecallConfig(mode="hybrid", candidates=q.k, keyword_scan=scan)
                   for scan in scans}
        recall = PostgresRecall(engine, None, len, configs[scans[0]])  # type: ignore[arg-type]
        for i, (question, vector) in enumerate(zip(asked, q.vectors, strict=True)):
            for scan in scans[i % len(scans):] + scans[:i % len(scans)]:
                started = time.perf_counter()
                await recall.candidates(q.owner.tenant, q.owner.user, question, vector, [],
                                        configs[scan])
                if i >= 10:  # (the first ten warm the plans and the cache)
                    ms[scan].append((time.perf_counter() - started) * 1000)
        rows.append(f"| {q.owner.rows:,} | {kind} | "
                    + " | ".join(pair(ms[scan]) for scan in scans) + " |")
    return rows


async def explain_candidates(engine: AsyncEngine, q: Queries, question: str, i: int) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of the statement recall sends for query i in hybrid mode, as
    sent: its text and arguments are taken from the driver, then explained as recall plans it."""
    from memory.recall_store import _PLANNED_FOR_ITS_USER, PostgresRecall

    cfg = RecallConfig(mode="hybrid", candidates=q.k)
    recall = PostgresRecall(engine, None, len, cfg)  # type: ignore[arg-type]  # no embedding here
    sent: list[Any] = []

    def keep(logged: Any) -> None:
        if "UNION ALL" in logged.query:
            sent.append(logged)

    # The pool hands back the connection given back last (db/engine.py): recall's next call
    # runs on this one.
    async with connect(engine) as conn:
        conn.raw.add_query_logger(keep)
    await recall.candidates(q.owner.tenant, q.owner.user, question, q.vectors[i], [], cfg)
    async with connect(engine) as conn:
        conn.raw.remove_query_logger(keep)
        if not sent:
            return "(not explained: recall ran on another connection)"
        async with conn.raw.transaction():
            await conn.raw.execute(_PLANNED_FOR_ITS_USER)
            rows = await conn.raw.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sent[0].query}",
                                        *sent[0].args)
    plan = "\n".join(r[0] for r in rows)
    return re.sub(r"'\[[^\]]*\]'::vector", "'[...]'::vector", plan)


async def queries(
    engine: AsyncEngine, layout: Layout, owners: list[Owner], n: int, k: int,
) -> Queries:
    """Vectors drawn as the data was, and their exact answers (the ground truth)."""
    clusters = Clusters(layout.seed)
    rng = np.random.default_rng([layout.seed, 2, *(o.rows for o in owners[:1]), len(owners)])
    vectors, topics = clusters.sample(rng, n)
    vocabulary = Vocabulary(layout.seed, clusters.topics)
    questions = [vocabulary.question(rng, int(t)) for t in topics]
    middling = [vocabulary.middling(rng) for _ in topics]
    exact = await run(engine, DENSE, owners, vectors, k, EXACT)
    return Queries(owners, vectors, questions, middling, k, exact)


async def measure_user(engine: AsyncEngine, q: Queries) -> tuple[str, str]:
    """One row of the main table (production, exact, HNSW forced) and the production EXPLAIN."""
    production = await run(engine, DENSE, q.owners, q.vectors, q.k)
    forced = await run(engine, DENSE, q.owners, q.vectors, q.k, HNSW)
    whole = await candidates_ms(engine, q, "dense")
    hybrid = await candidates_ms(engine, q, "hybrid")
    middling = await candidates_ms(engine, q, "hybrid", q.middling)
    plan = await explain(engine, DENSE, q.owner, q.vectors[0], q.k)
    chosen = plan_name(plan)
    for ms, asked in ((hybrid, q.questions), (middling, q.middling)):
        slowest = int(np.argmax(ms))
        plan += (f"\n\nEXPLAIN (ANALYZE, BUFFERS), the whole statement, hybrid, of the slowest "
                 f"question ({ms[slowest]:.1f} ms): {asked[slowest]!r}\n"
                 + await explain_candidates(engine, q, asked[slowest], slowest))
    ratio = median(q.exact.ms) / median(production.ms)
    peer = PEER.get(q.owner.rows)
    row = (
        f"| {q.owner.rows:,} | {chosen} | {pair(production.ms)} | {pair(q.exact.ms)} | "
        f"{ratio:.1f}x | {pair(forced.ms)} | {quality(production, q.exact)} | "
        f"{recall_at(forced.ids, q.exact.ids):.3f} | {min(map(len, production.ids))} / "
        f"{min(map(len, forced.ids))} | "
        f"{pair(whole)} | {pair(hybrid)} | {pair(middling)} | "
        f"{f'{peer[0]} / {peer[1]}' if peer else '-'} |"
    )
    return row, plan


async def measure_small(engine: AsyncEngine, q: Queries) -> list[str]:
    """Small users, one query each: every plan must return all min(k, rows) of their rows."""
    want = min(q.k, SMALL_ROWS)
    lines = []
    for name, statement, settings in (("exact", DENSE_SMALL, EXACT),
                                      ("production (known small)", DENSE_SMALL, ()),
                                      ("production (not known yet)", DENSE, ())):
        result = await run(engine, statement, q.owners, q.vectors, q.k, settings)
        full = sum(len(ids) == want for ids in result.ids)
        lines.append(
            f"| {name} | {pair(result.ms)} | {full}/{len(q.owners)} | {min(map(len, result.ids))} "
            f"| {recall_at(result.ids, q.exact.ids):.3f} |"
        )
    return lines


# --- experiments: candidate fixes, undone afterwards or kept apart from the migrated table ------


@dataclass(frozen=True)
class Variant:
    name: str
    statement: TextClause = DENSE
    settings: Settings = ()
    prepare: Callable[[Any], Awaitable[str]] | None = None  # gets an asyncpg connection
    undo: Callable[[Any], Awaitable[None]] | None = None


# With TOAST and indexes, over the partitions if any (pg_partition_tree is empty for a table
# that is not partitioned).
_TOTAL_SIZE = """SELECT coalesce((SELECT sum(pg_total_relation_size(relid))::bigint
                           FROM pg_partition_tree($1::text::regclass)),
                          pg_total_relation_size($1::text::regclass))"""
_LEAVES = ("SELECT relid::regclass::text FROM pg_partition_tree('message_embeddings') "
           "WHERE isleaf ORDER BY 1")


async def _create_statistics(conn: Any) -> str:
    """On every leaf: a plan pruned to one partition reads that partition's statistics."""
    for i, (leaf,) in enumerate(await conn.fetch(_LEAVES)):
        await conn.execute(f"CREATE STATISTICS bench_owner_{i} (dependencies) "
                           f"ON tenant_id, user_id FROM {leaf}")
    await conn.execute("ANALYZE message_embeddings")
    return "CREATE STATISTICS (dependencies) ON tenant_id, user_id on each partition; ANALYZE"


async def _drop_statistics(conn: Any) -> None:
    names = await conn.fetch(
        "SELECT stxname FROM pg_statistic_ext WHERE stxname LIKE 'bench_owner%'")
    for (name,) in names:
        await conn.execute(f"DROP STATISTICS {name}")
    if names:
        await conn.execute("ANALYZE message_embeddings")


async def _copy(partitions: int, conn: Any) -> str:
    """bench_copy: the rows of message_embeddings in another layout, one table (0) or hash
    partitioned by owner, with the migration's indexes but the primary key."""
    note = await conn.fetchval("SELECT obj_description(to_regclass('bench_copy'), 'pg_class')")
    if note and json.loads(note)["partitions"] == partitions:
        return f"built by an earlier run: {note}"
    await conn.execute("DROP TABLE IF EXISTS bench_copy")
    await conn.execute("CREATE TABLE bench_copy (LIKE message_embeddings INCLUDING DEFAULTS)"
                       + (" PARTITION BY HASH (tenant_id, user_id)" if partitions else ""))
    for i in range(partitions):
        await conn.execute(f"CREATE TABLE bench_copy_{i} PARTITION OF bench_copy "
                           f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})")
    started = time.perf_counter()
    await conn.execute(
        "INSERT INTO bench_copy SELECT * FROM message_embeddings ORDER BY created_at")
    facts: dict[str, Any] = {"partitions": partitions, "copy_s": time.perf_counter() - started}
    await conn.execute("SET maintenance_work_mem = '8GB'")
    await conn.execute("SET max_parallel_maintenance_workers = 1")
    for name, definition in await conn.fetch(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = 'message_embeddings'::regclass AND NOT i.indisprimary"
    ):
        started = time.perf_counter()
        await conn.execute(_whole(definition).replace("message_embeddings", "bench_copy"))
        facts[f"{name.removeprefix('message_embeddings_')}_build_s"] = time.perf_counter() - started
    await conn.execute("VACUUM (ANALYZE) bench_copy")
    facts["bytes"] = await conn.fetchval(_TOTAL_SIZE, "bench_copy")
    facts = {k: round(v, 1) if isinstance(v, float) else v for k, v in facts.items()}
    await conn.execute(f"COMMENT ON TABLE bench_copy IS '{json.dumps(facts)}'")
    return f"built: {json.dumps(facts)}"


def experiments(copy_partitions: int | None) -> list[Variant]:
    found = [
        Variant("hnsw.ef_search = 100", settings=(("hnsw.ef_search", "100"),)),
        Variant("hnsw.ef_search = 400", settings=(("hnsw.ef_search", "400"),)),
        Variant("extended statistics", prepare=_create_statistics, undo=_drop_statistics),
    ]
    if copy_partitions is not None:
        name = (f"copy in {copy_partitions} hash partitions" if copy_partitions
                else "copy as one table")
        found.append(Variant(name, COPIED, prepare=partial(_copy, copy_partitions)))
    return found


async def measure_variant(
    engine: AsyncEngine, url: str, variant: Variant, measured: list[Queries],
    small: Queries | None,
) -> list[str]:
    """Rows of the experiments table; EXPLAINs are printed as they come."""
    raw = await _connect(url)
    try:
        if variant.prepare:
            print(f"\n{variant.name}: {await variant.prepare(raw)}", flush=True)
        rows = []
        for q in [*measured, *([small] if small else [])]:
            result = await run(engine, variant.statement, q.owners, q.vectors, q.k,
                               variant.settings)
            plan = await explain(engine, variant.statement, q.owner, q.vectors[0], q.k,
                                 variant.settings)
            who = f"{q.owner.rows:,}" if len(q.owners) == 1 else f"{SMALL_ROWS} x {len(q.owners)}"
            full = sum(len(ids) == min(q.k, q.owners[i % len(q.owners)].rows)
                       for i, ids in enumerate(result.ids))
            rows.append(
                f"| {variant.name} | {who} | {plan_name(plan)} | {pair(result.ms)} | "
                f"{quality(result, q.exact)} | {full}/{len(result.ids)} |"
            )
            print(rows[-1], flush=True)
            print(f"\nEXPLAIN (ANALYZE, BUFFERS), {variant.name}, {who} memories:\n{plan}\n")
        return rows
    finally:
        if variant.undo:
            await variant.undo(raw)
        await raw.close()


# --- the report --------------------------------------------------------------------------------


async def print_setup(engine: AsyncEngine, facts: dict[str, float]) -> None:
    async with connect(engine) as conn:
        raw = conn.raw
        shown = await raw.fetch(
            "SELECT name, current_setting(name) AS value FROM pg_settings WHERE name = ANY($1) "
            "ORDER BY name",
            ["shared_buffers", "work_mem", "max_parallel_workers_per_gather", "jit",
             "plan_cache_mode", "hnsw.ef_search", "hnsw.iterative_scan", "hnsw.max_scan_tuples",
             "random_page_cost", "effective_cache_size"],
        )
        # Summed over the partitions, if any (a partitioned parent itself holds nothing).
        sizes = await raw.fetch("""
            SELECT c.relname, coalesce((SELECT sum(pg_relation_size(relid))::bigint
                                        FROM pg_partition_tree(c.oid)),
                                       pg_relation_size(c.oid)) AS bytes
            FROM pg_class c
            WHERE c.oid = 'message_embeddings'::regclass OR c.oid IN (
                SELECT indexrelid FROM pg_index WHERE indrelid = 'message_embeddings'::regclass)
            ORDER BY bytes DESC""")
        total = await raw.fetchval(_TOTAL_SIZE, "message_embeddings")
        partitions = await raw.fetchval("SELECT count(*) FROM pg_partition_tree("
                                        "'message_embeddings') WHERE isleaf AND level > 0")
        messages = await raw.fetchval("SELECT pg_total_relation_size('messages')")
        count = await raw.fetchval("SELECT count(*) FROM message_embeddings")
        version = await raw.fetchval("SELECT extversion FROM pg_extension WHERE extname='vector'")
        pg = await raw.fetchval("SHOW server_version")
    print(f"\nPostgreSQL {pg}, pgvector {version}; "
          + ", ".join(f"{r['name']}={r['value']}" for r in shown))
    layout = f"{partitions} hash partitions by owner" if partitions else "one table"
    print(f"\nmessage_embeddings ({layout}): {count:,} rows, {_size(total)} in all, with TOAST "
          f"and indexes (messages: {_size(messages)})")
    for row in sizes:
        print(f"  {row['relname']:<32} {_size(row['bytes'])}")
    print(f"load: {facts['rows_per_s']:,.0f} rows/s ({facts['load_s']:.0f} s, without the HNSW "
          f"and GIN indexes); HNSW build: {facts['hnsw_build_s']:.1f} s; full-text (GIN) build: "
          f"{facts.get('tsv_build_s', float('nan')):.1f} s")


def _size(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n < 2**30 else f"{n / 2**30:,.2f} GiB"


async def measure(
    url: str, layout: Layout, facts: dict[str, float], n: int, k: int,
    copy_partitions: int | None, with_experiments: bool = True, scans: list[int] | None = None,
) -> None:
    engine = create_engine(url, pool_size=2)
    try:
        raw = await _connect(url)
        await _drop_statistics(raw)  # left over by an interrupted run
        await raw.close()
        await print_setup(engine, facts)
        # Two cores: anything else running moves the figures; the load average says if it did.
        print(f"\nload average (1 min) at the start: {os.getloadavg()[0]:.2f}")
        print(f"{n} queries per user, p50 / p95 in ms at the client (planned for their "
              f"parameters); the dense list is {k} long (LIMIT {k}).")
        print("| memories | plan chosen | production | exact | exact/prod. p50 | HNSW forced | "
              f"recall@{k} prod., lost, distance | recall@{k} HNSW | fewest rows prod. / HNSW | "
              "whole stmt, dense | whole stmt, hybrid (a question) | hybrid, middling words | "
              "peer |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
        measured, plans = [], []
        for owner in layout.measured():
            measured.append(await queries(engine, layout, [owner], n, k))
            row, plan = await measure_user(engine, measured[-1])
            plans.append(plan)
            print(row, flush=True)
        if scans:
            print("\nthe hybrid statement by keyword_scan, p50 / p95 ms, side by side")
            print("| memories | question | " + " | ".join(f"scan {s}" for s in scans) + " |")
            print("|---|---|" + "---|" * len(scans))
            for q in measured:
                print("\n".join(await scans_side_by_side(engine, q, scans)), flush=True)
        small = None
        if layout.small_users:
            picked = np.random.default_rng([layout.seed, 3]).permutation(layout.small_users)[:n]
            owners = [layout.small()[i] for i in picked]
            small = await queries(engine, layout, owners, len(picked), k)
            print(f"\n{len(picked)} small users ({SMALL_ROWS} memories each), one query each; "
                  f"a full answer is {min(k, SMALL_ROWS)} rows")
            print(f"| plan | p50 / p95 ms | full answers | fewest rows | recall@{k} |")
            print("|---|---|---|---|---|")
            print("\n".join(await measure_small(engine, small)), flush=True)
        for q, plan in zip(measured, plans, strict=True):
            print(f"\nEXPLAIN (ANALYZE, BUFFERS), production, {q.owner.rows:,} memories:\n{plan}")
        if small:
            for name, statement in (("production (known small)", DENSE_SMALL),
                                    ("production (not known yet)", DENSE)):
                plan = await explain(engine, statement, small.owner, small.vectors[0], k)
                print(f"\nEXPLAIN (ANALYZE, BUFFERS), {name}, a {SMALL_ROWS}-row user:\n{plan}")
        print("\nexperiments")
        rows = []
        for variant in experiments(copy_partitions) if with_experiments else []:
            rows += await measure_variant(engine, url, variant, measured, small)
        print(f"| experiment | memories | plan chosen | p50 / p95 ms | "
              f"recall@{k}, lost, distance | full answers |")
        print("|---|---|---|---|---|---|")
        print("\n".join(rows))
        print(f"\nload average (1 min) at the end: {os.getloadavg()[0]:.2f}")
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--mid-sizes", default="1000,3000",
                        help="users between small and big, where starved HNSW scans would show")
    parser.add_argument("--small-users", type=int, default=2000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--candidates", type=int, default=RecallConfig().candidates,
                        help="the dense list's length (LIMIT); recall's default unless given")
    parser.add_argument("--copy-partitions", type=int, default=0,
                        help="layout of the copy experiment: 0 one table, N hash partitions")
    parser.add_argument("--no-copy", action="store_true", help="skip the copy experiment")
    parser.add_argument("--no-experiments", action="store_true", help="skip every experiment")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datadir", type=Path, default=Path("/tmp/jin_scale_pg"))
    parser.add_argument("--shared-buffers", default="12GB",
                        help="room for the table and its partitioned copy, hot")
    parser.add_argument("--fresh", action="store_true", help="load again even if loaded")
    parser.add_argument("--keyword-scans", default="",
                        help="a comma list of keyword_scan values to time side by side (hybrid)")
    args = parser.parse_args()
    layout = Layout(
        tuple(int(n) for n in args.sizes.split(",")),
        tuple(int(n) for n in args.mid_sizes.split(",") if n),
        args.small_users, args.tenants, args.seed,
    )
    server = start_server(args.datadir, args.shared_buffers)
    url = server.get_uri(layout.database)
    print(f"database {layout.database}: {layout.rows:,} rows, "
          f"{len(layout.measured()) + layout.small_users:,} users")
    facts = asyncio.run(database_state(server.get_uri(), layout, args.fresh))
    if facts is None:
        migrate(url)
        facts = asyncio.run(load(url, server.get_uri(), layout))
    else:  # (migrated to head still: a later migration's indexes are measured too)
        migrate(url)
        print("loaded by an earlier run: measuring only (--fresh loads again)")
    copy = None if args.no_copy else args.copy_partitions
    scans = [int(n) for n in args.keyword_scans.split(",") if n]
    asyncio.run(measure(url, layout, facts, args.queries, args.candidates, copy,
                        not args.no_experiments, scans))


if __name__ == "__main__":
    main()

"""Recall at scale: the production dense query over one table of ~1.3M message embeddings.

    python -m bench.recall_scale --sizes 10000,100000,1000000 --small-users 2000 --queries 200 \\
        --datadir /tmp/jin_scale_pg
    python -m bench.recall_scale --sizes 10000,100000 --datadir /tmp/jin_scale_pg     # quick

One table (the schema of the migrations) holds a user of each of --sizes rows and --small-users
users of 100 rows, spread over --tenants tenants, their rows interleaved in time as traffic leaves
them. Vectors are synthetic and clustered: 200 topics x 20 subtopics, a row is a subtopic plus
noise, unit length; queries are drawn the same way. For each big user the dense list of
memory/search.py runs on the memory engine (custom plans, iterative HNSW scans) as the planner
chooses, then with the plan forced each way: exact (the owner index and a sort, what a per-user
filter costs without a vector index) and HNSW. It prints p50/p95, exact/HNSW ratios, recall@40
against exact, one EXPLAIN (ANALYZE, BUFFERS) per user, the table and index sizes and the HNSW
build time. Small users must get min(40, rows) rows back. Never passes or fails on time.

The embedded Postgres lives in --datadir and keeps the loaded database: a run with the same
layout measures again without loading (--fresh loads anew). The HNSW index is dropped for the
bulk load and built afterwards, which is the build time reported.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import create_memory_engine, migrate
from chat.tables import fetch

DIM = 384
K = 40  # RecallConfig.candidates: the length of the dense list
SMALL_ROWS = 100
CHAT_ROWS = 500  # messages per synthetic chat
CHUNK = 25_000  # rows per load statement
PEER = {10_000: (8.0, 21.0)}  # mem0 on pgvector, this machine (issue #4): p50, p95 in ms

# memory/search.py `_CANDIDATES`, its dense list over messages (`dm`), word for word.
DENSE = text("""SELECT message_id, embedding <=> :qv AS d FROM message_embeddings
        WHERE :dense AND tenant_id = :t AND user_id = :u AND message_id <> ALL(:exclude)
        ORDER BY embedding <=> :qv LIMIT :n""")

# Session settings that force a plan; "planner" is production (nothing set).
PLANS: dict[str, tuple[tuple[str, str], ...]] = {
    "exact": (("enable_indexscan", "off"),),  # bitmap scan of the owner index, then a sort
    "planner": (),
    "hnsw": (("enable_sort", "off"),),  # the HNSW index is the only path without a sort
}

_INSERT_EMBEDDINGS = """
INSERT INTO message_embeddings (message_id, chat_id, tenant_id, user_id, embedding,
                                content_tsv, embedder, kind, created_at)
SELECT m.id, m.chat_id, ch.tenant_id, ch.user_id, b.embedding,
       to_tsvector('jin_search', m.content), 'synthetic', m.kind, m.created_at
FROM unnest($1::uuid[], $2::vector[]) AS b(id, embedding)
JOIN messages m ON m.id = b.id JOIN chats ch ON ch.id = m.chat_id"""


@dataclass(frozen=True)
class Owner:
    tenant: str
    user: str
    rows: int


@dataclass(frozen=True)
class Layout:
    sizes: tuple[int, ...]
    small_users: int
    tenants: int
    seed: int

    def owners(self) -> list[Owner]:
        """The big users first (one tenant each, shared with small users), then the small."""
        big = [Owner(f"tenant-{i % self.tenants}", f"big-{n}", n) for i, n in enumerate(self.sizes)]
        small = [
            Owner(f"tenant-{j % self.tenants}", f"user-{j:05d}", SMALL_ROWS)
            for j in range(self.small_users)
        ]
        return big + small

    @property
    def rows(self) -> int:
        return sum(self.sizes) + self.small_users * SMALL_ROWS

    @property
    def database(self) -> str:
        sizes = "_".join(str(n) for n in self.sizes)
        return f"scale_{sizes}_{self.small_users}x{SMALL_ROWS}_t{self.tenants}_s{self.seed}"


class Clusters:
    """Unit vectors around 200 topics x 20 subtopics: neighbours are near, not all alike."""

    def __init__(self, seed: int, topics: int = 200, subtopics: int = 20) -> None:
        rng = np.random.default_rng([seed, 0])
        centres = _unit(rng.standard_normal((topics, DIM), dtype=np.float32))
        parents = np.repeat(centres, subtopics, axis=0)
        self.subtopics = _unit(parents + 0.7 * _noise(rng, len(parents)))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        picked = self.subtopics[rng.integers(0, len(self.subtopics), n)]
        return _unit(picked + 0.6 * _noise(rng, n))


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


def percentiles(ms: list[float]) -> tuple[float, float]:
    p50, p95 = np.percentile(ms, [50, 95])
    return float(p50), float(p95)


def recall_at(found: list[list[Any]], truth: list[list[Any]]) -> float:
    hits = sum(len(set(f) & set(t)) for f, t in zip(found, truth, strict=True))
    return hits / max(1, sum(len(t) for t in truth))


def plan_name(plan: str) -> str:
    if "message_embeddings_hnsw" in plan:
        return "HNSW index scan (iterative)"
    if "message_embeddings_owner" in plan:
        return "owner index + sort (exact)"
    if "Seq Scan" in plan:
        return "seq scan + sort (exact)"
    return "other"


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


async def load(url: str, layout: Layout) -> dict[str, float]:
    import asyncpg
    from pgvector import Vector
    from pgvector.asyncpg import register_vector

    conn = await asyncpg.connect(url)
    await register_vector(conn)
    await conn.execute("SET synchronous_commit = off")
    hnsw = await conn.fetchval("SELECT pg_get_indexdef('message_embeddings_hnsw'::regclass)")
    await conn.execute("DROP INDEX message_embeddings_hnsw")
    owners = layout.owners()
    await conn.copy_records_to_table("chats", columns=["id", "tenant_id", "user_id"], records=[
        (chat_id(i, c), o.tenant, o.user) for i, o in enumerate(owners)
        for c in range(-(-o.rows // CHAT_ROWS))
    ])
    rng = np.random.default_rng([layout.seed, 1])
    owner_of_row = rng.permutation(np.repeat(
        np.arange(len(owners), dtype=np.int64), [o.rows for o in owners]
    ))
    ranks = owner_ranks(owner_of_row, len(owners))
    words = np.array([a + b for a in ("ka", "lo", "mi", "nu", "pe", "ri", "so", "tu", "va", "ze")
                      for b in ("ber", "dan", "fis", "gol", "hum", "jek", "lin", "mor")])
    clusters, started = Clusters(layout.seed), time.perf_counter()
    first = datetime(2025, 1, 1, tzinfo=UTC)
    step = timedelta(days=365) / layout.rows
    for lo in range(0, layout.rows, CHUNK):
        hi = min(lo + CHUNK, layout.rows)
        ids = [uuid.UUID(bytes=rng.bytes(16)) for _ in range(hi - lo)]
        texts = [" ".join(w) for w in words[rng.integers(0, len(words), (hi - lo, 8))]]
        await conn.copy_records_to_table(
            "messages", columns=["id", "chat_id", "position", "kind", "content", "created_at"],
            records=[
                (ids[i], chat_id(int(owner_of_row[r]), int(ranks[r]) // CHAT_ROWS),
                 int(ranks[r]) % CHAT_ROWS, ("user", "assistant")[int(ranks[r]) % 2], texts[i],
                 first + step * r)
                for i, r in enumerate(range(lo, hi))
            ],
        )
        vectors = [Vector(v) for v in clusters.sample(rng, hi - lo)]
        await conn.execute(_INSERT_EMBEDDINGS, ids, vectors)
        rate = hi / (time.perf_counter() - started)
        print(f"  loaded {hi:>10,} / {layout.rows:,} rows  {rate:,.0f} rows/s", flush=True)
    loaded = time.perf_counter() - started
    await conn.execute("SET maintenance_work_mem = '8GB'")
    await conn.execute("SET max_parallel_maintenance_workers = 1")
    print("  building the HNSW index ...", flush=True)
    started = time.perf_counter()
    await conn.execute(hnsw)
    built = time.perf_counter() - started
    await conn.execute("VACUUM (ANALYZE) messages")
    await conn.execute("VACUUM (ANALYZE) message_embeddings")
    await conn.execute("CHECKPOINT")
    await conn.close()
    return {"load_s": loaded, "rows_per_s": layout.rows / loaded, "hnsw_build_s": built}


async def database_state(server_url: str, layout: Layout, fresh: bool) -> dict[str, float] | None:
    """The load figures of a complete earlier load of this layout, else None (database reset)."""
    import asyncpg

    conn = await asyncpg.connect(server_url)
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


async def mark_loaded(server_url: str, layout: Layout, facts: dict[str, float]) -> None:
    import asyncpg

    conn = await asyncpg.connect(server_url)
    await conn.execute(f"COMMENT ON DATABASE {layout.database} IS '{json.dumps(facts)}'")
    await conn.close()


# --- measuring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    ms: list[float]
    ids: list[list[uuid.UUID]]


def _params(owner: Owner, vector: np.ndarray) -> dict[str, Any]:
    from pgvector import Vector

    return {"qv": Vector(vector), "t": owner.tenant, "u": owner.user, "n": K, "exclude": [],
            "dense": True}


async def run(
    engine: AsyncEngine, owners: list[Owner], vectors: np.ndarray, warm: np.ndarray,
    settings: tuple[tuple[str, str], ...] = (),
) -> Run:
    """One query per vector (owners[i % len(owners)]), timed at the client, after a warm-up."""
    ms: list[float] = []
    ids: list[list[uuid.UUID]] = []
    async with engine.connect() as conn:
        raw = (await conn.get_raw_connection()).driver_connection
        for name, value in settings:
            await raw.execute(f"SET {name} = {value}")
        try:
            deadline = time.perf_counter() + 5
            for i, vector in enumerate(warm):
                await fetch(conn, DENSE, _params(owners[i % len(owners)], vector))
                if time.perf_counter() > deadline:
                    break
            for i, vector in enumerate(vectors):
                started = time.perf_counter()
                rows = await fetch(conn, DENSE, _params(owners[i % len(owners)], vector))
                ms.append((time.perf_counter() - started) * 1000)
                ids.append([row["message_id"] for row in rows])
        finally:
            for name, _ in settings:
                await raw.execute(f"RESET {name}")
    return Run(ms, ids)


async def explain(
    engine: AsyncEngine, owner: Owner, vector: np.ndarray,
    settings: tuple[tuple[str, str], ...] = (),
) -> str:
    statement = text("EXPLAIN (ANALYZE, BUFFERS) " + str(DENSE))
    async with engine.connect() as conn:
        raw = (await conn.get_raw_connection()).driver_connection
        for name, value in settings:
            await raw.execute(f"SET {name} = {value}")
        rows = await fetch(conn, statement, _params(owner, vector))
        for name, _ in settings:
            await raw.execute(f"RESET {name}")
    # The query vector's 384 numbers say nothing about the plan.
    return re.sub(r"'\[[^\]]*\]'::vector", "'[...]'::vector", "\n".join(r[0] for r in rows))


async def candidates_ms(engine: AsyncEngine, owner: Owner, vectors: np.ndarray) -> list[float]:
    """The whole candidate statement recall runs (memory/search.py), dense mode."""
    from memory.recall import RecallConfig
    from memory.search import PostgresRecall

    cfg = RecallConfig(mode="dense")
    recall = PostgresRecall(engine, None, len, cfg)  # type: ignore[arg-type]  # no embedding here
    for vector in vectors[:20]:
        await recall.candidates(owner.tenant, owner.user, "", vector, [], cfg)
    ms = []
    for vector in vectors:
        started = time.perf_counter()
        await recall.candidates(owner.tenant, owner.user, "", vector, [], cfg)
        ms.append((time.perf_counter() - started) * 1000)
    return ms


async def print_setup(engine: AsyncEngine, facts: dict[str, float]) -> None:
    async with engine.connect() as conn:
        raw = (await conn.get_raw_connection()).driver_connection
        shown = await raw.fetch(
            "SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1) ORDER BY name",
            ["shared_buffers", "work_mem", "max_parallel_workers_per_gather", "jit",
             "plan_cache_mode", "hnsw.ef_search", "hnsw.iterative_scan", "hnsw.max_scan_tuples",
             "random_page_cost", "effective_cache_size"],
        )
        sizes = await raw.fetch("""
            SELECT c.relname, pg_relation_size(c.oid) AS bytes FROM pg_class c
            WHERE c.oid = 'message_embeddings'::regclass OR c.oid IN (
                SELECT indexrelid FROM pg_index WHERE indrelid = 'message_embeddings'::regclass)
               OR c.oid = (SELECT reltoastrelid FROM pg_class
                           WHERE oid = 'message_embeddings'::regclass)
            ORDER BY bytes DESC""")
        total = await raw.fetchval("SELECT pg_total_relation_size('message_embeddings')")
        messages = await raw.fetchval("SELECT pg_total_relation_size('messages')")
        count = await raw.fetchval("SELECT count(*) FROM message_embeddings")
        version = await raw.fetchval("SELECT extversion FROM pg_extension WHERE extname='vector'")
    print(f"\npgvector {version}; " + ", ".join(
        f"{r['name']}={r['setting']}{r['unit'] or ''}" for r in shown))
    print(f"\nmessage_embeddings: {count:,} rows, {_size(total)} in all "
          f"(messages: {_size(messages)})")
    for row in sizes:
        print(f"  {row['relname']:<32} {_size(row['bytes'])}")
    print(f"load: {facts['rows_per_s']:,.0f} rows/s ({facts['load_s']:.0f} s, without the HNSW "
          f"index); HNSW build: {facts['hnsw_build_s']:.1f} s")


def _size(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n < 2**30 else f"{n / 2**30:,.2f} GiB"


def _pair(ms: list[float]) -> str:
    p50, p95 = percentiles(ms)
    return f"{p50:.2f} / {p95:.2f}"


async def measure_big(
    engine: AsyncEngine, layout: Layout, index: int, owner: Owner, queries: int,
) -> tuple[str, str]:
    """One row of the table, and the EXPLAIN of the production query for this user."""
    rng = np.random.default_rng([layout.seed, 2, index])
    clusters = Clusters(layout.seed)
    vectors, warm = clusters.sample(rng, queries), clusters.sample(rng, 50)
    runs = {name: await run(engine, [owner], vectors, warm, s) for name, s in PLANS.items()}
    whole = await candidates_ms(engine, owner, vectors)
    plan = await explain(engine, owner, vectors[0])
    exact, production, hnsw = runs["exact"], runs["planner"], runs["hnsw"]
    ratio = percentiles(exact.ms)[0] / percentiles(production.ms)[0]
    short = min(len(ids) for ids in production.ids)
    peer = PEER.get(owner.rows)
    row = (
        f"| {owner.rows:,} | {plan_name(plan)} | {_pair(production.ms)} | {_pair(exact.ms)} | "
        f"{ratio:.1f}x | {_pair(hnsw.ms)} | {recall_at(production.ids, exact.ids):.3f} | "
        f"{recall_at(hnsw.ids, exact.ids):.3f} | {short} | {_pair(whole)} | "
        f"{f'{peer[0]} / {peer[1]}' if peer else '-'} |"
    )
    print(row, flush=True)
    return row, plan


async def measure_small(
    engine: AsyncEngine, layout: Layout, queries: int,
) -> tuple[list[str], str, str]:
    """Many small users, one query each: every plan must return all min(40, rows) rows."""
    owners = layout.owners()[len(layout.sizes):]
    if not owners:
        return [], "", ""
    rng = np.random.default_rng([layout.seed, 3])
    picked = [owners[i] for i in rng.permutation(len(owners))[:queries]]
    clusters = Clusters(layout.seed)
    vectors, warm = clusters.sample(rng, len(picked)), clusters.sample(rng, 50)
    runs = {name: await run(engine, picked, vectors, warm, s) for name, s in PLANS.items()}
    want = min(K, SMALL_ROWS)
    lines = []
    for name, result in runs.items():
        full = sum(len(ids) == want for ids in result.ids)
        fewest = min(len(ids) for ids in result.ids)
        lines.append(
            f"| {name} | {_pair(result.ms)} | {full}/{len(picked)} | {fewest} | "
            f"{recall_at(result.ids, runs['exact'].ids):.3f} |"
        )
    planned = await explain(engine, picked[0], vectors[0])
    forced = await explain(engine, picked[0], vectors[0], PLANS["hnsw"])
    return lines, planned, forced


async def measure(url: str, layout: Layout, facts: dict[str, float], queries: int) -> None:
    engine = create_memory_engine(url, pool_size=2)
    try:
        await print_setup(engine, facts)
        print(f"\n{queries} queries per user, p50 / p95 in ms at the client (memory engine).")
        print("| memories | plan chosen | production | exact | exact/prod. p50 | HNSW forced | "
              "recall@40 prod. | recall@40 HNSW | fewest rows | whole candidate stmt | peer |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        plans = []
        for i, owner in enumerate(layout.owners()[:len(layout.sizes)]):
            plans.append(await measure_big(engine, layout, i, owner, queries))
        lines, planned, forced = await measure_small(engine, layout, queries)
        if lines:
            print(f"\nsmall users ({SMALL_ROWS} memories each), one query each, "
                  f"a full answer = {min(K, SMALL_ROWS)} rows")
            print("| plan | p50 / p95 ms | full answers | fewest rows | recall@40 |")
            print("|---|---|---|---|---|")
            print("\n".join(lines))
        for (_, plan), owner in zip(plans, layout.owners(), strict=False):
            print(f"\nEXPLAIN (ANALYZE, BUFFERS), production query, {owner.rows:,} memories:")
            print(plan)
        if lines:
            print(f"\nEXPLAIN (ANALYZE, BUFFERS), production query, a {SMALL_ROWS}-row user:")
            print(planned)
            print(f"\nthe same, HNSW forced (enable_sort=off):\n{forced}")
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--small-users", type=int, default=2000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datadir", type=Path, default=Path("/tmp/jin_scale_pg"))
    parser.add_argument("--shared-buffers", default="6GB")
    parser.add_argument("--fresh", action="store_true", help="load again even if loaded")
    args = parser.parse_args()
    sizes = tuple(int(n) for n in args.sizes.split(","))
    layout = Layout(sizes, args.small_users, args.tenants, args.seed)
    server = start_server(args.datadir, args.shared_buffers)
    url = server.get_uri(layout.database)
    print(f"database {layout.database}: {layout.rows:,} rows, {len(layout.owners()):,} users")
    facts = asyncio.run(database_state(server.get_uri(), layout, args.fresh))
    if facts is None:
        migrate(url)
        facts = asyncio.run(load(url, layout))
        asyncio.run(mark_loaded(server.get_uri(), layout, facts))
    else:
        print("loaded earlier: measuring only (--fresh loads again)")
    asyncio.run(measure(url, layout, facts, args.queries))


if __name__ == "__main__":
    main()

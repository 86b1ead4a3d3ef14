"""The keyword list's walk over a user with long messages: one walk of the owner index (the
statement before migration 0024) beside the two walks recall runs now (memory/recall_store.py
`_KEYWORD`: the rows whose full-text vector fits in an index entry, from the index; the longer
ones from the table, back to where the first walk stopped).

One user of `--rows` messages, a share of them long (`--long-words` distinct words each, and
one of seven "delta" words; the short ones carry one of 97 "alpha", 13 "beta", 1,013 "gamma"
and 7 "delta" words). Each question's match list alone, `EXPLAIN ANALYZE`'s execution time,
warm, the median of `--repeat`. The data stay in `--datadir` for the next run.

    .venv/bin/python -m bench.keyword_walk --rows 200000 --long-share 0.1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from pathlib import Path

import asyncpg

from api.database import migrate
from memory.recall_store import _KEYWORD

_ONE_WALK = """SELECT message_id AS id, content_tsv AS tsv FROM message_embeddings
WHERE tenant_id = $1 AND user_id = $2 AND content_tsv @@ to_tsquery('jin_search', $3)
ORDER BY created_at DESC LIMIT $4"""
# The shipped statement with nothing excluded from the user's rows (no chat on screen, none
# started over).
_NOTHING_SHOWN = {":keyword": "true", ":t": "$1", ":u": "$2", ":q": "$3", ":scan": "$4",
                  ":exclude": "'{}'::uuid[]", "CAST(:shown_chat AS uuid)": "NULL::uuid",
                  ":shown_chat": "NULL::uuid", ":shown_from": "0", ":shown_at": "now()",
                  "CAST(:hide_chat AS uuid)": "NULL::uuid", ":hide_chat": "NULL::uuid",
                  ":hide_before": "now()"}
QUESTIONS = {"a word of 1 in 13 short rows, in no long one": "beta3",
             "a word of 1 in 7 rows, long or short": "delta2",
             "a word of 1 in 97 short rows": "alpha5",
             "two rare words together": "alpha5 & beta3"}

_CHAT = "00000000-0000-0000-0000-000000000001"
_LOAD = f"""
INSERT INTO chats (id, tenant_id, user_id) VALUES ('{_CHAT}', 't', 'u');
INSERT INTO messages (id, chat_id, position, kind, content, created_at)
SELECT gen_random_uuid(), '{_CHAT}', g, 'user',
  CASE WHEN g % {{every}} = 0
    THEN 'delta' || (g % 7) || ' ' || (SELECT string_agg('w' || md5((g * 1000 + k)::text), ' ')
                                       FROM generate_series(1, {{words}}) k)
    ELSE 'alpha' || (g % 97) || ' beta' || (g % 13) || ' gamma' || (g % 1013)
         || ' delta' || (g % 7) END,
  now() - make_interval(secs => {{rows}} - g)
FROM generate_series(1, {{rows}}) g;
INSERT INTO message_embeddings (message_id, chat_id, tenant_id, user_id, embedding, content_tsv,
                                embedder, created_at, position, ann)
SELECT id, chat_id, 't', 'u', NULL, recall_text_vector(content), NULL, created_at,
       position, false FROM messages;
"""


def _server(datadir: Path) -> object:
    import pgserver

    datadir.parent.mkdir(parents=True, exist_ok=True)
    return pgserver.get_server(datadir, cleanup_mode=None)


async def _loaded(url: str, database: str) -> bool:
    """Whether an earlier run loaded `database` whole (its comment says so); else it is made
    again, empty."""
    admin = await asyncpg.connect(url)
    try:
        note = await admin.fetchval("SELECT shobj_description(oid, 'pg_database') "
                                    "FROM pg_database WHERE datname = $1", database)
        if note == "loaded":
            return True
        await admin.execute(f"DROP DATABASE IF EXISTS {database}")
        await admin.execute(f"CREATE DATABASE {database}")
        return False
    finally:
        await admin.close()


async def _load(url: str, database: str, rows: int, every: int, words: int) -> None:
    conn = await asyncpg.connect(url)
    try:
        print(f"loading {rows:,} rows ...", flush=True)
        await conn.execute(_LOAD.format(rows=rows, every=every, words=words))
        await conn.execute("VACUUM ANALYZE message_embeddings")
        await conn.execute(f"COMMENT ON DATABASE {database} IS 'loaded'")
    finally:
        await conn.close()


async def _median_ms(conn: asyncpg.Connection, sql: str, args: tuple, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        plan = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, *args)
        times.append(json.loads(plan)[0]["Execution Time"])
    return statistics.median(times)


async def measure(url: str, repeat: int, scan: int) -> None:
    two_walks = _KEYWORD
    for name, value in _NOTHING_SHOWN.items():
        two_walks = two_walks.replace(name, value)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SET plan_cache_mode = force_custom_plan")  # as recall plans it
        long_rows = await conn.fetchval(
            "SELECT count(*) FROM message_embeddings "
            "WHERE NOT recall_walk_fits(tenant_id, user_id, content_tsv)")
        print(f"long rows (walked from the table): {long_rows:,}\n")
        print("| question | matches | one walk | two walks | ratio |")
        print("|---|---|---|---|---|")
        for label, query in QUESTIONS.items():
            args = ("t", "u", query, scan)
            one = await _median_ms(conn, _ONE_WALK, args, repeat)
            two = await _median_ms(conn, two_walks, args, repeat)
            found = sorted(r["id"] for r in await conn.fetch(two_walks, *args))
            assert found == sorted(r["id"] for r in await conn.fetch(_ONE_WALK, *args))
            print(f"| {label} (`{query}`) | {len(found)} | {one:.2f} ms | {two:.2f} ms "
                  f"| {two / one:.2f}x |")
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--long-share", type=float, default=0.1)
    parser.add_argument("--long-words", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--scan", type=int, default=500, help="keyword_scan, as served")
    parser.add_argument("--datadir", type=Path, default=Path("/tmp/jin_keyword_walk"))
    args = parser.parse_args()
    every = max(1, round(1 / args.long_share)) if args.long_share > 0 else args.rows + 1
    server = _server(args.datadir)
    admin_url: str = server.get_uri()  # type: ignore[attr-defined]
    database = f"walk_{args.rows}_{every}_{args.long_words}"
    url = admin_url.replace("/postgres?", f"/{database}?")
    if not asyncio.run(_loaded(admin_url, database)):
        migrate(url)
        asyncio.run(_load(url, database, args.rows, every, args.long_words))
    asyncio.run(measure(url, args.repeat, args.scan))


if __name__ == "__main__":
    main()

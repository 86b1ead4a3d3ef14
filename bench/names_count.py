"""What recall's names statement costs for a large user (memory/recall_store.py `_NAMES_HELD`).

    .venv/bin/python bench/names_count.py --rows 300000 --share 1.0,0.1

One user with `--rows` indexed messages in a scratch embedded Postgres of its own (`--datadir`;
its foreign key to `messages` and its HNSW index dropped, so that the rows load in seconds). A
share of them holds the name "Anna"; none holds "Zorro". Printed: the median time of the
statement as recall runs it (a generic plan, as the engine sets), for a question naming Anna,
one naming Zorro, and one naming both, at each share; beside it in the same run, the baseline:
each name counted by full text's GIN index alone (the statement of d9a6590), which hands over
every match of the word at once, so that its cost follows how many rows hold the name.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from sqlalchemy import TextClause, text

from api.database import migrate
from db.engine import create_engine
from memory.ranking import RecallConfig
from memory.recall_store import _NAMES_HELD, PostgresRecall

QUESTIONS = ["When does Anna turn thirty?", "When does Zorro turn thirty?",
             "Did Anna meet Zorro in Lisbon?"]

BASELINE = text("""
SELECT w AS word, (SELECT count(*) FROM (
    SELECT 1 FROM message_embeddings
    WHERE tenant_id = :t AND user_id = :u
      AND content_tsv @@ plainto_tsquery('jin_search', w) LIMIT :rows) x) AS held
FROM unnest(CAST(:words AS text[])) w""")

_LOAD = text("""
INSERT INTO message_embeddings (message_id, chat_id, tenant_id, user_id, embedding, content_tsv,
                                embedder, created_at)
SELECT gen_random_uuid(), gen_random_uuid(), 't', 'big', array_fill(0.05, ARRAY[384])::vector,
       to_tsvector('jin_search', CASE WHEN i % :every = 0 THEN 'hi anna, ' ELSE 'hi, ' END
                                 || 'how are you doing today, word' || (i % 3000)),
       'bench', now() - make_interval(secs => i)
FROM generate_series(1, :rows) i""")


async def measure(url: str, rows: int, share: float, repeats: int) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("ALTER TABLE message_embeddings DROP CONSTRAINT IF EXISTS "
                                    "message_embeddings_message_id_fkey"))
            await conn.execute(text("DROP INDEX IF EXISTS message_embeddings_hnsw"))
            await conn.execute(text("DELETE FROM message_embeddings WHERE user_id = 'big'"))
            await conn.execute(_LOAD, {"rows": rows, "every": max(1, round(1 / share))})
        raw = await engine.raw_connection()
        await raw.driver_connection.execute("VACUUM ANALYZE message_embeddings")
        raw.close()
        recall = PostgresRecall(engine, None, len, RecallConfig())  # type: ignore[arg-type]
        for question in QUESTIONS:
            served = await _median(recall, question, _NAMES_HELD, repeats)
            baseline = await _median(recall, question, BASELINE, repeats)
            print(f"{rows:>9,} rows, Anna in {share:>5.0%}: {question!r:34} "
                  f"{served[0]:7.2f} ms, baseline {baseline[0]:7.2f} ms -> {served[1]!r}",
                  flush=True)
            assert served[1] == baseline[1], (served, baseline)
    finally:
        await engine.dispose()


async def _median(recall: PostgresRecall, question: str, statement: TextClause,
                  repeats: int) -> tuple[float, str | None]:
    times = []
    for _ in range(repeats + 2):
        began = time.perf_counter()
        plain = await recall._without_names(question, 4, statement, {"t": "t", "u": "big"})
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times[2:]), plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--share", default="1.0,0.1", help="shares of rows that name Anna")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--datadir", type=Path, default=Path("/tmp/jin_names_pg"))
    args = parser.parse_args()
    import pgserver

    server = pgserver.get_server(args.datadir, cleanup_mode=None)
    url = server.get_uri()
    migrate(url)
    for share in (float(s) for s in args.share.split(",")):
        asyncio.run(measure(url, args.rows, share, args.repeats))


if __name__ == "__main__":
    main()

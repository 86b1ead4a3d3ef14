"""What recall's names statement costs for a large user (memory/recall_store.py `_NAMES_HELD`).

    .venv/bin/python bench/names_count.py --rows 300000 --share 1.0,0.1

One user with `--rows` indexed messages, one chat of alternating sides, in a scratch embedded
Postgres of its own (`--datadir`; its HNSW index dropped, so that the rows load in seconds). A
share of them greets "Anna"; none holds "Zorro". Printed: the median time of the statement as
recall runs it (a generic plan, as the engine sets), for a question naming Anna, one naming
Zorro, and one naming both, at each share; beside it in the same run, the baseline: the same
statement less how each side addresses the names it holds (memory/speakers.py), the names
counted alone, as in 49aeb96.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import migrate
from chat.ports import NewChat
from chat.store import PostgresChatStore
from chat.types import ModelSettings
from db.engine import create_engine
from db.statements import connect, fetch
from memory.recall_store import _NAMES_HELD, name_words, names_counted

QUESTIONS = ["When does Anna turn thirty?", "When does Zorro turn thirty?",
             "Did Anna meet Zorro in Lisbon?"]

BASELINE = text(names_counted(":u") + "SELECT w AS word, held FROM counted")

_LOAD = text("""
WITH m AS (
    INSERT INTO messages (id, chat_id, position, kind, content, status, token_count,
                          tokens_after)
    SELECT gen_random_uuid(), :chat, i, CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END,
           CASE WHEN i % :every = 0 THEN 'Hi Anna, ' ELSE 'Hi, ' END
           || 'how are you doing today, word' || (i % 3000), 'complete', 10, 10 * i
    FROM generate_series(1, :rows) i
    RETURNING id, content, position
)
INSERT INTO message_embeddings (message_id, chat_id, tenant_id, user_id, embedding, content_tsv,
                                embedder, created_at)
SELECT id, :chat, 't', 'big', array_fill(0.05, ARRAY[384])::vector,
       to_tsvector('jin_search', content), 'bench', now() - make_interval(secs => position)
FROM m""")


async def measure(url: str, rows: int, share: float, repeats: int) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("DROP INDEX IF EXISTS message_embeddings_hnsw"))
            await conn.execute(text("DELETE FROM chats WHERE user_id = 'big'"))
        chat = await PostgresChatStore(engine).create_chat(
            NewChat("t", "big", "", "", ModelSettings(), "queue"))
        async with engine.begin() as conn:
            await conn.execute(_LOAD, {"rows": rows, "every": max(1, round(1 / share)),
                                       "chat": chat.id})
        raw = await engine.raw_connection()
        await raw.driver_connection.execute("VACUUM ANALYZE messages, message_embeddings")
        raw.close()
        for question in QUESTIONS:
            served = await _median(engine, question, _NAMES_HELD, repeats)
            baseline = await _median(engine, question, BASELINE, repeats)
            print(f"{rows:>9,} rows, Anna in {share:>5.0%}: {question!r:34} "
                  f"{served[0]:7.2f} ms, baseline {baseline[0]:7.2f} ms -> {served[1]!r}",
                  flush=True)
            assert served[1] == baseline[1], (served, baseline)
    finally:
        await engine.dispose()


async def _median(engine: AsyncEngine, question: str, statement: TextClause,
                  repeats: int) -> tuple[float, list[str]]:
    """The statement's median ms, and the words it finds held, each as its rows count them."""
    times, held = [], []
    for _ in range(repeats + 2):
        began = time.perf_counter()
        async with connect(engine) as conn:
            found = await fetch(conn, statement, {"t": "t", "u": "big", "rows": 4,
                                                  "words": name_words(question)})
        times.append((time.perf_counter() - began) * 1000)
        held = [row["word"] for row in found if row["held"] >= 4]
    return statistics.median(times[2:]), held


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

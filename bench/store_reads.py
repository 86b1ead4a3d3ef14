"""The chat store's reads, through asyncpg directly against SQLAlchemy's Connection, side by side.

    .venv/bin/python bench/store_reads.py [--rounds 9] [--calls 50]

A chat of 1,000 seeded messages in a throwaway Postgres (or DATABASE_URL). The history page of
200 rows (`list_messages`) and a compaction pass's read of a 75-row span (`read_span`) as the
store runs them (db.statements: connect and fetch), and the same statements through SQLAlchemy's
Connection and result rows (the store's way before session 9), alternating by round. Prints the
calling process's CPU a call (the worker's share), medians over the rounds, and checks that both
ways give the same rows. Never passes or fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import database  # noqa: E402
from chat.ports import NewChat  # noqa: E402
from chat.row_mapping import message_from_row  # noqa: E402
from chat.store import SPAN_SQL, PostgresChatStore, history_query  # noqa: E402
from chat.testing import seed_history  # noqa: E402
from chat.types import POSITION_GAP, ModelSettings  # noqa: E402
from db.engine import create_engine  # noqa: E402

PAGE, SPAN = 200, 75


async def cpu_a_call(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        await call()
    return (time.process_time() - started) / calls * 1000


async def measure(url: str, rounds: int, calls: int) -> None:
    engine = create_engine(url, pool_size=2)
    store = PostgresChatStore(engine)
    chat = await store.create_chat(NewChat(
        tenant_id="bench", user_id="bench", title="", system_prompt="Be brief.",
        settings=ModelSettings(), busy_policy="queue"))
    await seed_history(engine, chat.id, 1_000)
    db = engine.execution_options(isolation_level="AUTOCOMMIT")
    after = 200 * POSITION_GAP  # a page from the middle of the history

    async def page_sqlalchemy() -> list[Any]:
        sql, _ = history_query(before=None, after=after)
        params = {"chat": chat.id, "t": "bench", "limit": PAGE + 1, "after": after}
        async with db.connect() as conn:
            rows = (await conn.execute(text(sql), params)).mappings().all()
        return [message_from_row(r) for r in rows[:PAGE]]

    async def page_direct() -> list[Any]:
        page = await store.list_messages("bench", chat.id, before=None, after=after, limit=PAGE)
        assert page is not None
        return page.messages

    async def span_sqlalchemy() -> list[Any]:
        async with db.connect() as conn:
            rows = (await conn.execute(SPAN_SQL, {"chat": chat.id, "limit": SPAN})).mappings()
            return [message_from_row(r) for r in rows.all()]

    async def span_direct() -> list[Any]:
        return (await store.read_span(chat, SPAN))[1]

    for label, sqlalchemy, direct in [
        (f"history page of {PAGE} rows", page_sqlalchemy, page_direct),
        (f"span of {SPAN} rows", span_sqlalchemy, span_direct),
    ]:
        if await sqlalchemy() != await direct():
            raise SystemExit(f"{label}: the two ways gave different rows")
        times: dict[str, list[float]] = {"SQLAlchemy Connection": [], "asyncpg directly": []}
        for i in range(rounds):
            ways = [("SQLAlchemy Connection", sqlalchemy), ("asyncpg directly", direct)]
            for name, call in ways if i % 2 == 0 else ways[::-1]:
                times[name].append(await cpu_a_call(call, calls))
        base, now = (statistics.median(v) for v in times.values())
        print(f"{label}: CPU a call, median of {rounds} x {calls}: SQLAlchemy Connection "
              f"{base:.2f} ms, asyncpg directly {now:.2f} ms ({now / base:.2f}x)")
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    if args.rounds < 1 or args.calls < 1:
        parser.error("--rounds and --calls must be at least 1")
    with ExitStack() as stack:
        asyncio.run(measure(database(stack), args.rounds, args.calls))


if __name__ == "__main__":
    main()

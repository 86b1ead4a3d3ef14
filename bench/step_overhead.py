"""The server's own time per step: everything but the model's time.

Runs a real `jin serve` worker against the fake OpenAI-compatible server (zero delay) and a real
Postgres, on loopback. Each step reports `timings` measured inside the worker: total (request in
to outcome committed) and model (provider request to last chunk); overhead = total - model.

    .venv/bin/python bench/step_overhead.py [--steps 200] [--chats 10] [--concurrency 32]
        [--seconds 10] [--warmup 2] [--rounds 3]

Prints medians and p99s at 10, 1,000 and 100,000 messages of history, their ratio to the 10-message
figure, and steps/s with 32 concurrent chats (measured after `--warmup` seconds of the same load,
once the worker's pools hold their connections) by one worker, by two, by one with compaction off
and by one with compaction and recall off: each `--rounds` times, in turn, then the median of each;
and the machine's pace before, at each round and after (`speed_probe`). Never passes or fails on
time. Every size gets `--chats` chats, each of its own user, stepped round robin (`--steps` at each
size, so a "10-message" chat ends near 10 + 2 x steps / chats rows): the sizes differ in history
alone, not in how much memory their users have indexed or how often they compact.
Long chats are seeded as jin leaves them: with a summary row before their newest 40 rows
(compaction keeps running as the benchmark adds turns, as in production). Every model role,
the embedder too, is the fake; memory is on: each step recalls over its user's past (what the
benchmark's own steps wrote and indexed; the seeded rows are not indexed: HNSW takes ~170
synthetic vectors/s here, and recall's cost at 10,000 to 1,000,000 rows is measured by
bench/recall_scale.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import httpx
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import PIDS, database, fake_model, jin_worker, tree_cpu  # noqa: E402
from chat.testing import seed_history, seed_summary  # noqa: E402
from db.engine import create_engine  # noqa: E402

SUMMARISED_ABOVE = 60  # seeded chats longer than this get a summary row...
KEPT_AFTER_SUMMARY = 40  # ...before their newest 40 rows
SUMMARY = "## Facts\n" + "\n".join(f"- seeded fact {i}: code LCK-{i:04d}" for i in range(30))

# The peer: LangGraph with its Postgres checkpointer (PostgresSaver) and trim_messages, the
# median step overhead in ms. Not measured by this script: figures as reported, with their date
# and machine. A ratio against them holds only on a machine of the same kind.
# - 10 and 1,000 messages: 14-23 ms and 107-113 ms, issue #20 (filed 2026-12), on this
#   project's sandbox machine (2 cores, AMD EPYC, 24 GiB); the lower end is used.
# - 10,000 messages and steps/s: issue #2 (2026-11), on a sandbox machine of the same kind.
PEER = {10: 14.0, 1_000: 107.0, 10_000: 569.0}
PEER_STEPS_PER_S = 51


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def make_chats(client: httpx.AsyncClient, engine, n_chats: int, size: int) -> list[str]:
    ids = []
    for _ in range(n_chats):
        # A user per chat, as in production: recall searches the user's own past.
        user = f"bench-{uuid.uuid4().hex[:12]}"
        r = await client.post("/v1/chats", json={"user_id": user, "system_prompt": "Be brief."})
        ids.append(r.json()["id"])
        if size:
            await seed_history(engine, uuid.UUID(ids[-1]), size)
        if size > SUMMARISED_ABOVE:
            # A long chat as jin leaves it: compacted, a summary row before its newest rows.
            await seed_summary(engine, uuid.UUID(ids[-1]), KEPT_AFTER_SUMMARY, SUMMARY, 400)
    return ids


# A question as long as the seeded history rows (~60 tokens), so a chat's tail keeps the same
# shape while the benchmark adds to it; the fake model echoes it back.
FILLER = " ".join(f"lorem{i % 17}" for i in range(30))


def client_session(base_url: str) -> httpx.AsyncClient:
    # The load generator shares the machine's 2 cores with what it measures: its own CPU a step
    # is printed beside the worker's ("client").
    return httpx.AsyncClient(base_url=base_url, timeout=60,
                             limits=httpx.Limits(keepalive_expiry=4.0))


async def settle(engine) -> None:
    """Vacuum and checkpoint after seeding, so autovacuum does not run during the measurement."""
    auto = engine.execution_options(isolation_level="AUTOCOMMIT")
    async with auto.connect() as conn:
        await conn.execute(text("VACUUM (ANALYZE) messages"))
        await conn.execute(text("CHECKPOINT"))


async def step(client: httpx.AsyncClient, chat_id: str, i: int,
               content: str | None = None) -> tuple[float, float]:
    t0 = time.perf_counter()
    r = await client.post(f"/v1/chats/{chat_id}/messages",
                          json={"content": content or f"question {i} {FILLER}"})
    client_ms = (time.perf_counter() - t0) * 1000
    body = r.json()
    if r.status_code != 200 or body.get("status") != "complete":
        raise RuntimeError(f"step failed: {r.status_code} {body}")
    timing = r.headers["server-timing"]
    # The worker's whole time on the request (routing, validation, JSON included), less the
    # time spent waiting on the model; and the client's round trip less the model's time: the
    # same with HTTP both ways (uvicorn's parsing and writing, this client's httpx, loopback).
    app_ms = float(timing.partition("dur=")[2])
    model_ms = body["timings"]["model_ms"]
    return app_ms - model_ms, client_ms - model_ms


async def sequential(
    client, engine, sizes: tuple[int, ...], steps: int, n_chats: int
) -> dict[int, dict]:
    """Steps on chats of each history size, interleaved, so that drift hits every size alike."""
    pools = {}
    for size in sizes:
        # The same number of chats at every size, stepped round robin, so that every size's
        # users bring the same amount of indexed memory to recall and compact as often: the
        # sizes then differ in their history alone.
        pools[size] = await make_chats(client, engine, n_chats, size)
        for i, chat_id in enumerate(pools[size][:5]):  # warm-up
            await step(client, chat_id, -i)
    await settle(engine)
    flushes = await wal_flushes(engine)
    overhead: dict[int, list[float]] = {size: [] for size in sizes}
    latency: dict[int, list[float]] = {size: [] for size in sizes}
    for i in range(steps):
        for size in sizes:
            o, c = await step(client, pools[size][i % len(pools[size])], i)
            overhead[size].append(o)
            latency[size].append(c)
    await asyncio.sleep(1)  # (backends report their I/O counts within a second)
    if flushes is not None and (after := await wal_flushes(engine)) is not None:
        print(f"WAL flushes a step (every size, the indexer's included): "
              f"{(after - flushes) / (steps * len(sizes)):.2f}")
    return {
        size: {
            "chats": len(pools[size]), "median": statistics.median(overhead[size]),
            "p99": pct(overhead[size], 0.99), "client_median": statistics.median(latency[size]),
        }
        for size in sizes
    }


async def wal_flushes(engine) -> int | None:
    """How many times Postgres has flushed its write-ahead log to disk (one a durable commit,
    unless commits share one); None before Postgres 16. On a disk whose flush takes ms, these
    are much of a step's time, the peer's too (bench/peer_langgraph.py counts its own)."""
    try:
        async with engine.connect() as conn:
            return int((await conn.execute(text(
                "SELECT coalesce(sum(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal'"
            ))).scalar_one())
    except Exception:  # noqa: BLE001 (an older Postgres: no such view or column)
        return None


async def history_pages(client: httpx.AsyncClient, engine) -> None:
    """Keyset pages of 200 rows from the start, the middle and the end of a history."""
    print("\nhistory pages of 200 rows (client round trip, median of 50):")
    for size in (1_000, 100_000):
        chat_id = (await make_chats(client, engine, 1, size))[0]
        gap = 1024  # chat.types.POSITION_GAP
        for label, query in [
            ("first page", "limit=200"),
            ("middle", f"limit=200&after={size // 2 * gap}"),
            ("last page", f"limit=200&before={(size + 1) * gap}"),
        ]:
            times = []
            for _ in range(50):
                t0 = time.perf_counter()
                rows = (await client.get(f"/v1/chats/{chat_id}/messages?{query}")).json()[
                    "messages"]
                times.append((time.perf_counter() - t0) * 1000)
            assert len(rows) == 200
            print(f"  {size:>7,} msgs, {label:>10}: {statistics.median(times):5.2f} ms")


async def concurrent(
    client, engine, n: int, seconds: float, pids: dict[str, int] | None = None,
    warmup: float = 0.0,
) -> dict[str, float]:
    """Steps/s of `n` chats stepped at once; with `pids` (name -> process), the CPU seconds each
    process spent a step over the phase (/proc), the figure that moves least with the machine.

    `warmup` seconds of the same load go first, unmeasured: a worker's pools open their
    connections then (each new one costs Postgres ~15-40 ms of asyncpg's type introspection and
    of preparing the step's statements, once in a worker's life), and the figures are those of
    a worker that has been serving."""
    chats = await make_chats(client, engine, n, 10)
    await settle(engine)
    done: list[float] = []

    async def worker(chat_id: str, until: float, into: list[float], i: int = 0) -> None:
        # A client of its own for each chat, as each user's app holds one: one pool holding
        # every chat's connection walks all of them for each request (httpcore 1.0).
        async with client_session(str(client.base_url)) as own:
            while time.perf_counter() < until:
                o, _ = await step(own, chat_id, i)
                into.append(o)
                i += 1

    if warmup > 0:
        until = time.perf_counter() + warmup
        await asyncio.gather(*(worker(c, until, []) for c in chats))
    pids = pids or {}
    before = {name: tree_cpu(pid) for name, pid in pids.items()}
    client_before = time.process_time()  # this process alone: the load generator
    t0 = time.perf_counter()
    # Numbered on from where no warm-up reaches: each question stays new to recall.
    await asyncio.gather(*(worker(c, t0 + seconds, done, 100_000) for c in chats))
    elapsed = time.perf_counter() - t0
    cpu = {name: (tree_cpu(pid) - before[name]) / len(done) * 1000 for name, pid in pids.items()}
    cpu["client"] = (time.process_time() - client_before) / len(done) * 1000
    return {"steps_per_s": len(done) / elapsed, "median": statistics.median(done),
            "p99": pct(done, 0.99), "steps": len(done), "cpu": cpu}


def warmed(args: argparse.Namespace) -> str:
    return f" after {args.warmup:.0f} s of warm-up" if args.warmup > 0 else ""


def cpu_text(cpu: dict[str, float]) -> str:
    return ("; CPU a step: " + ", ".join(f"{name} {ms:.2f} ms" for name, ms in cpu.items())
            if cpu else "")


def processes(jin_url: str, db_url: str, model_url: str) -> dict[str, int]:
    """The processes to read CPU from: the worker, the embedded Postgres and the fake (a
    Postgres given by DATABASE_URL is left out)."""
    names = {"worker": jin_url, "Postgres": db_url, "fake": model_url}
    return {name: PIDS[url] for name, url in names.items() if url in PIDS}


async def run(args: argparse.Namespace, db_url: str, jin_url: str, model_url: str) -> None:
    engine = create_engine(db_url, pool_size=4)
    async with client_session(jin_url) as client:
        results = await sequential(client, engine, (10, 1_000, 100_000), args.steps,
                                   args.chats)
        for size, r in results.items():
            print(f"history {size:>7,} msgs ({r['chats']:>3} chats): overhead median "
                  f"{r['median']:6.2f} ms  p99 {r['p99']:6.2f} ms  | with HTTP (client round trip "
                  f"less the model's time) {r['client_median']:6.2f} ms", flush=True)
        base = results[10]["median"]
        print("\nratio to the 10-message median:")
        for size, r in results.items():
            peer = PEER.get(size)
            peer_txt = (
                f"   peer (LangGraph) {peer:.1f} ms -> jin is {peer / r['median']:.1f}x faster"
                if peer else ""
            )
            print(f"  {size:>7,}: {r['median'] / base:4.2f}x{peer_txt}")
        await history_pages(client, engine)
    await engine.dispose()


async def run_throughput(
    args: argparse.Namespace, db_url: str, jin_url: str, model_url: str, label: str
) -> dict[str, float]:
    engine = create_engine(db_url, pool_size=4)
    async with client_session(jin_url) as client:
        c = await concurrent(client, engine, args.concurrency, args.seconds,
                             processes(jin_url, db_url, model_url), args.warmup)
    peer = f"   peer: {PEER_STEPS_PER_S} steps/s" if label == PHASES[0][0] else ""
    print(f"{args.concurrency} concurrent chats, {label}, {args.seconds:.0f} s{warmed(args)}: "
          f"{c['steps_per_s']:.0f} steps/s ({c['steps']} steps), overhead median "
          f"{c['median']:.2f} ms p99 {c['p99']:.2f} ms{peer}{cpu_text(c['cpu'])}", flush=True)
    await engine.dispose()
    return c


# The throughput phases, each on a worker of its own: one process; `jin serve --workers 2` (this
# machine has 2 cores, shared with Postgres, the fake model and this client); compaction off
# (with it on, the chats outgrow the trigger during the run and compact; the fake helper
# answers with a short summary); and recall off too, which leaves the step and the indexer:
# still more than the peer does (its checkpointer and trim_messages keep no memory).
PHASES: list[tuple[str, int, dict[str, str]]] = [
    ("1 worker process", 1, {}),
    ("2 worker processes", 2, {}),
    ("1 worker process, compaction off", 1, {"JIN_COMPACTION": "false"}),
    ("1 worker process, compaction and recall off", 1,
     {"JIN_COMPACTION": "false", "JIN_RECALL": "false"}),
]


def throughput_rounds(
    args: argparse.Namespace, db_url: str, model_url: str
) -> dict[str, list[float]]:
    """Steps/s of each phase, `--rounds` times over, the phases in turn: this machine's pace
    moves by ±15% within minutes, and a round's phases see the same pace."""
    figures: dict[str, list[float]] = {label: [] for label, _, _ in PHASES}
    for round_no in range(1, args.rounds + 1):
        print(f"\nround {round_no} of {args.rounds}: {speed_probe()}")
        for label, workers, env in PHASES:
            # Each phase's worker is stopped before the next starts: an idle one would still
            # index (its indexer claims from the queue every worker shares) and take a share.
            with ExitStack() as phase:
                url = jin_worker(phase, db_url, model_url, workers=workers, **env)
                c = asyncio.run(run_throughput(args, db_url, url, model_url, label))
            figures[label].append(c["steps_per_s"])
    return figures


def print_rounds(figures: dict[str, list[float]], concurrency: int) -> None:
    print(f"\n{concurrency} concurrent chats, median of {len(next(iter(figures.values())))} "
          "rounds (lowest - highest):")
    for label, values in figures.items():
        print(f"  {label:>45}: {statistics.median(values):4.0f} steps/s "
              f"({min(values):.0f} - {max(values):.0f})")


def speed_probe() -> str:
    """The machine's pace: the time of a fixed loop of pure Python, run while nothing else of
    the benchmark runs. The figures follow it (on the development machine: 197 ms at its
    fastest, 300 and more in its slow spells, when the figures come out up to twice as high):
    compare runs of like pace."""
    started = time.perf_counter()
    for _ in range(5):
        sum(range(3_000_000))
    return f"speed probe {(time.perf_counter() - started) * 1000:.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--chats", type=int, default=10,
                        help="chats per history size (each of 100,000 rows is seeded)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3,
                        help="times each throughput phase runs; the median is reported")
    parser.add_argument("--warmup", type=float, default=2.0,
                        help="seconds of the concurrent load run before it is measured (0: none)")
    args = parser.parse_args()
    if args.rounds < 1 or args.seconds <= 0 or args.warmup < 0:
        parser.error("--rounds must be at least 1, --seconds above 0, --warmup at least 0")
    with ExitStack() as stack:
        db_url = database(stack)
        model_url = fake_model(stack)
        with ExitStack() as phase:
            jin_url = jin_worker(phase, db_url, model_url)
            print(f"jin worker {jin_url}, fake model {model_url}, one process each, loopback; "
                  f"{speed_probe()}\n")
            asyncio.run(run(args, db_url, jin_url, model_url))
        print_rounds(throughput_rounds(args, db_url, model_url), args.concurrency)
        print(f"\nat the end: {speed_probe()}")


if __name__ == "__main__":
    main()

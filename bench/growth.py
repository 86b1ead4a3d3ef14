"""Steps per second as the chats grow: what one step costs as its user's memory fills up.

    .venv/bin/python bench/growth.py [--seconds 40] [--every 5] [--concurrency 32]
        [--workers 1] [--no-compaction]

`--concurrency` chats (each of its own user, 10 seeded messages) are stepped at once for
`--seconds`, as in bench/step_overhead.py's concurrent phase, which measures 8 s of it. Every
`--every` seconds it prints the window's steps/s, how many steps each chat has taken by then, and
the CPU seconds a step of the worker, the embedded Postgres and the fake model (/proc). Each
step adds two messages, and recall ranks a user's messages and facts by exact scans until the
user has `JIN_RECALL_ANN_FROM` of them, and at most the newest `keyword_scan` matches for full
text: this shows how a step's cost follows. Never passes or fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import database, fake_model, jin_worker, tree_cpu  # noqa: E402
from bench.step_overhead import (  # noqa: E402
    client_session,
    make_chats,
    processes,
    settle,
    speed_probe,
    step,
)
from db.engine import create_engine  # noqa: E402


async def grow(args: argparse.Namespace, db_url: str, jin_url: str, model_url: str) -> None:
    engine = create_engine(db_url, pool_size=4)
    pids = processes(jin_url, db_url, model_url)
    async with client_session(jin_url) as client:
        chats = await make_chats(client, engine, args.concurrency, 10)
        await settle(engine)
        done = 0
        until = time.perf_counter() + args.seconds

        async def chat(chat_id: str) -> None:
            nonlocal done
            i = 100_000  # numbered as in step_overhead.py: each question new to recall
            while time.perf_counter() < until:
                await step(client, chat_id, i)
                i += 1
                done += 1

        def cpu_now() -> dict[str, float]:
            return {name: tree_cpu(pid) for name, pid in pids.items()}

        async def report() -> None:
            started = time.perf_counter()
            last = (started, 0, cpu_now())
            for _ in range(int(args.seconds // args.every)):  # whole windows only
                await asyncio.sleep(args.every - (time.perf_counter() - last[0]))
                now = (time.perf_counter(), done, cpu_now())
                steps = max(now[1] - last[1], 1)
                cpu = ", ".join(f"{name} {(now[2][name] - last[2][name]) / steps * 1000:.2f} ms"
                                for name in pids)
                print(f"{now[0] - started:5.1f} s: {steps / (now[0] - last[0]):6.1f} steps/s, "
                      f"{now[1] / len(chats):6.1f} steps a chat; CPU a step: {cpu}", flush=True)
                last = now

        await asyncio.gather(report(), *(chat(c) for c in chats))
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-compaction", action="store_true")
    args = parser.parse_args()
    if args.every <= 0 or args.seconds < args.every:
        parser.error("--every must be above 0 and at most --seconds")
    if args.concurrency < 1 or args.workers < 1:
        parser.error("--concurrency and --workers must be at least 1")
    env = {"JIN_COMPACTION": "false"} if args.no_compaction else {}
    with ExitStack() as stack:
        db_url = database(stack)
        model_url = fake_model(stack)
        jin_url = jin_worker(stack, db_url, model_url, workers=args.workers, **env)
        workers = f"{args.workers} worker process{'es' if args.workers > 1 else ''}"
        print(f"{args.concurrency} chats, {workers}, compaction "
              f"{'off' if args.no_compaction else 'on'}; {speed_probe()}")
        asyncio.run(grow(args, db_url, jin_url, model_url))
        print(f"at the end: {speed_probe()}")


if __name__ == "__main__":
    main()

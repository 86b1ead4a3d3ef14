"""How fast an abort posted to one worker stops a stream running on another.

Two `jin serve` workers share one Postgres; the fake model streams a long answer slowly. For each
trial a client streams a step from worker A, posts `/abort` to worker B once the answer has
started, and measures the time until A's stream ends. The abort travels through Postgres only.

    .venv/bin/python bench/abort_latency.py [--trials 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import database, fake_model, jin_worker  # noqa: E402


async def trial(a: httpx.AsyncClient, b: httpx.AsyncClient) -> float:
    chat = (await a.post("/v1/chats", json={"user_id": "bench"})).json()["id"]
    asked = 0.0
    async with a.stream("POST", f"/v1/chats/{chat}/messages", json={"content": "talk"},
                        headers={"Accept": "text/event-stream"}) as response:
        async for line in response.aiter_lines():
            if line == "event: message_chunk" and not asked:
                asked = time.perf_counter()
                r = await b.post(f"/v1/chats/{chat}/abort")
                assert r.json()["aborted"], r.text
            if line == "event: step_end":
                break
    ended = time.perf_counter()
    rows = (await a.get(f"/v1/chats/{chat}/messages")).json()["messages"]
    assert rows[-1]["status"] == "interrupted", rows[-1]
    return (ended - asked) * 1000


async def run(a_url: str, b_url: str, trials: int, poll: float) -> None:
    async with httpx.AsyncClient(base_url=a_url, timeout=60) as a, \
            httpx.AsyncClient(base_url=b_url, timeout=60) as b:
        times = [await trial(a, b) for _ in range(trials)]
    print(f"abort across workers (poll every {poll * 1000:.0f} ms), {trials} trials: "
          f"median {statistics.median(times):.0f} ms, max {max(times):.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--poll", type=float, default=0.2, help="JIN_ABORT_POLL_SECONDS")
    args = parser.parse_args()
    with ExitStack() as stack:
        db_url = database(stack)
        model_url = fake_model(stack, chunks=2000, chunk_delay=0.005)
        env = {"JIN_ABORT_POLL_SECONDS": str(args.poll)}
        a_url = jin_worker(stack, db_url, model_url, **env)
        b_url = jin_worker(stack, db_url, model_url, **env)
        asyncio.run(run(a_url, b_url, args.trials, args.poll))


if __name__ == "__main__":
    main()

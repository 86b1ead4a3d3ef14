"""Reading a model's stream under an abort signal: jin's way against a task and a wait per item.

    .venv/bin/python bench/answer_stream.py [--rounds 9]

orchestrator/answer.py `until_aborted` reads the stream in one task of its own, into a queue the
abort also feeds. The baseline below is how it read before: a task for each item, raced by
asyncio.wait against the abort. Both read the same in-process streams (4 items, as the echo fake
answers a benchmark's step; 300, as a model streams an answer token by token), on uvloop as the
worker runs, alternating, and the CPU time an item is printed: medians of `--rounds`. Prints
figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.answer import AbortSignal, until_aborted  # noqa: E402


async def per_item_tasks(stream: AsyncIterator[Any], abort: AbortSignal) -> AsyncIterator[Any]:
    """The baseline: until_aborted as it was before (a task and an asyncio.wait an item)."""
    iterator = aiter(stream)
    waiter = asyncio.ensure_future(abort.event.wait())
    try:
        while not abort.event.is_set():
            nxt = asyncio.ensure_future(anext(iterator))
            done, _ = await asyncio.wait({nxt, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if nxt not in done:
                nxt.cancel()
                await asyncio.gather(nxt, return_exceptions=True)
                return
            try:
                yield nxt.result()
            except StopAsyncIteration:
                return
    finally:
        waiter.cancel()
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


async def model(items: int) -> AsyncIterator[int]:
    for i in range(items):
        if i % 8 == 0:
            await asyncio.sleep(0)  # a network read now and then, several items in each
        yield i


async def cpu_per_item(reader: Any, items: int, streams: int) -> float:
    started = time.process_time()
    for _ in range(streams):
        async for _ in reader(model(items), AbortSignal()):
            pass
    return (time.process_time() - started) / (streams * items) * 1e6


async def run(rounds: int) -> None:
    for items, streams in ((4, 2000), (300, 30)):
        figures: dict[str, list[float]] = {"per-item tasks (before)": [], "jin": []}
        for _ in range(rounds):
            figures["per-item tasks (before)"].append(
                await cpu_per_item(per_item_tasks, items, streams))
            figures["jin"].append(await cpu_per_item(until_aborted, items, streams))
        before, now = (statistics.median(v) for v in figures.values())
        print(f"streams of {items:>3} items: per-item tasks {before:5.2f} us an item, "
              f"jin {now:5.2f} us ({now / before:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    import uvloop

    uvloop.install()
    asyncio.run(run(args.rounds))


if __name__ == "__main__":
    main()

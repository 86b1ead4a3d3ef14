"""What layered runtime memory costs: helper calls and tokens per 100 turns, the latency it adds
to `message_end`, its tokens in the prompt against the tail's, and rejections of a junk helper.

    .venv/bin/python bench/layered_memory.py [--chats 5] [--turns 20] [--chunks 20]
        [--chunk-delay 0.01]

Two `jin serve` workers on one Postgres, one with L1 runtime memory on and one with it off,
stepped in turn: each turn of each chat goes to a chat on either worker, so both meet the
machine alike. One fake model serves every role (in this process: it counts what it was asked).
The brain streams `--chunks` chunks `--chunk-delay` s apart, a model's pace; the helper answers
an L1 rewrite as a helper model would: the previous state kept, and a line for the new turn
(the user's first words), at most 12 lines. The turns are a synthetic conversation: a user
telling about themselves, their plans and their questions.

Printed:
- helper calls and helper tokens per 100 turns (prompt tokens counted with cl100k, as jin counts
  its prompts; the answer's too), L1 only: L2 and L3 are not built yet;
- the time to `message_end` at the client, p50 and p95, L1 on and off, and their ratio (the
  update runs after `message_end`: the target is no difference);
- how often the update reached the step's own stream (before `step_end`);
- the prompt's L1 tokens (the `runtime_memory` section of the `context` event) against the
  tail's, per turn, at the end of the chats;
- then the same turns with a helper that answers junk (a truncated line): the rejections
  counted by `jin_runtime_memory_rejections_total`, by reason.
Figures only: it never passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from bench.harness import database, jin_worker  # noqa: E402
from llm.testing import FakeOpenAIServer, Reply  # noqa: E402
from llm.tokens import TiktokenCounter  # noqa: E402
from memory.runtime_prompt import HELPER_SYSTEM  # noqa: E402

SSE = {"accept": "text/event-stream"}
NAMES = ["Ann", "Bo", "Chen", "Dara", "Eli", "Fay", "Gus"]
SAYINGS = [
    "my name is {name} and I live in {city}",
    "I am planning a trip to {city} in {month}",
    "my sister works as a {job} there",
    "can you suggest a good book about {topic}",
    "actually I changed my mind, I want to learn {topic} first",
    "what did I tell you about my sister",
    "I started running every morning before work",
    "remind me what my plan for {month} was",
    "I adopted a cat called {pet} last week",
    "how long does it take to learn {topic} well",
]
FILL = {"city": ["Lisbon", "Oslo", "Kyiv", "Osaka", "Quito"],
        "month": ["May", "June", "October"], "job": ["nurse", "pilot", "teacher"],
        "topic": ["chess", "Rust", "sailing", "pottery"], "pet": ["Miso", "Pixel", "Tofu"]}


def saying(rng: random.Random, name: str) -> str:
    text = rng.choice(SAYINGS)
    return text.format(name=name, **{k: rng.choice(v) for k, v in FILL.items()})


class HelperStandIn:
    """The helper's answer to an L1 rewrite (None for anything else: the fake's echo), and
    every answer it gave."""

    def __init__(self, junk: bool) -> None:
        self.junk = junk
        self.answers: list[str] = []

    def __call__(self, messages: list[dict[str, Any]]) -> Reply | None:
        if not messages or messages[0].get("content") != HELPER_SYSTEM:
            return None
        if self.junk:  # cut off mid-line, as a helper that hit its token limit
            answer = "user_name: Ann\ncurrent_task: plan a trip to ("
        else:
            prompt = str(messages[-1].get("content", ""))
            state = prompt.split("Current state:\n", 1)[-1].split("\n\n", 1)[0]
            lines = [] if state.strip() == "(none)" else state.splitlines()
            for line in prompt.splitlines():
                if line.startswith("User: "):
                    words = [w.strip(",.?!").lower() for w in line[6:].split()][:6]
                    lines.append(f"turn_{len(lines) + 1}_said: {' '.join(words)}")
            answer = "\n".join(lines[-12:])
        self.answers.append(answer)
        return Reply([answer])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def step(client: httpx.AsyncClient, chat_id: str, text: str) -> dict[str, Any]:
    """One streamed step: the time to `message_end`, the context's sections' tokens, and
    whether the L1 update came on the step's own stream."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"update": False}
    event = ""
    async with client.stream("POST", f"/v1/chats/{chat_id}/messages",
                             json={"content": text}, headers=SSE) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
                if event == "message_end":
                    out["message_end_ms"] = (time.perf_counter() - t0) * 1000
            elif line.startswith("data: ") and event == "context":
                data = json.loads(line[6:])
                out["sections"] = {s["name"]: s["tokens"] for s in data["sections"]}
            elif event == "runtime_memory_update":
                out["update"] = True
    return out


async def conversation(urls: dict[str, str], chats: int, turns: int) -> dict[str, list[dict]]:
    rng = random.Random(11)
    seen: dict[str, list[dict]] = {name: [] for name in urls}
    clients = {name: httpx.AsyncClient(base_url=url, timeout=120) for name, url in urls.items()}
    try:
        ids = {name: [] for name in urls}
        for c in range(chats):
            for name, client in clients.items():
                r = await client.post("/v1/chats", json={"user_id": f"user-{c}"})
                ids[name].append(r.json()["id"])
        for t in range(turns):
            for c in range(chats):
                text = saying(rng, NAMES[c % len(NAMES)])
                order = list(clients) if (t + c) % 2 == 0 else list(reversed(clients))
                for name in order:
                    result = await step(clients[name], ids[name][c], text)
                    result["turn"] = t
                    seen[name].append(result)
    finally:
        for client in clients.values():
            await client.aclose()
    return seen


def rejections(url: str) -> Counter[str]:
    text = httpx.get(f"{url}/metrics").text
    out: Counter[str] = Counter()
    for line in text.splitlines():
        if line.startswith("jin_runtime_memory_rejections_total{"):
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            out[reason] += int(float(line.rsplit(" ", 1)[1]))
    return out


def run(args: argparse.Namespace, junk: bool) -> None:
    counter = TiktokenCounter()
    helper = HelperStandIn(junk)
    fake = FakeOpenAIServer(echo_chunks=args.chunks, echo_chunk_delay=args.chunk_delay,
                            respond=helper)
    model_url = fake.start()
    try:
        with ExitStack() as stack:
            db = database(stack)
            first = "false" if args.control else "true"  # the control: both off
            urls = {"on": jin_worker(stack, db, model_url, JIN_RUNTIME_MEMORY=first),
                    "off": jin_worker(stack, db, model_url, JIN_RUNTIME_MEMORY="false")}
            seen = asyncio.run(conversation(urls, args.chats, args.turns))
            rejected = rejections(urls["on"])
    finally:
        fake.stop()
    l1 = [b for b in fake.requests if b["messages"][0].get("content") == HELPER_SYSTEM]
    turns = len(seen["on"])
    if junk:
        print(f"\njunk helper: {len(l1)} L1 calls over {turns} turns, rejected: "
              f"{dict(rejected) or 'none'} ({sum(rejected.values())} of {len(l1)})")
        return
    prompt_tokens = sum(sum(counter.count(str(m.get("content", ""))) for m in b["messages"])
                        for b in l1)
    answer_tokens = sum(counter.count(a) for a in helper.answers)
    per100 = 100 / turns
    print(f"{args.chats} chats x {args.turns} turns on each worker; the brain streams "
          f"{args.chunks} chunks {args.chunk_delay * 1000:.0f} ms apart\n")
    print(f"helper, L1: {len(l1) * per100:.0f} calls per 100 turns, "
          f"{prompt_tokens * per100:,.0f} prompt tokens and {answer_tokens * per100:,.0f} "
          f"answer tokens per 100 turns ({prompt_tokens / max(len(l1), 1):.0f} + "
          f"{answer_tokens / max(len(l1), 1):.0f} a call); L2, L3: not built")
    on = [r["message_end_ms"] for r in seen["on"]]
    off = [r["message_end_ms"] for r in seen["off"]]
    print(f"time to message_end, p50 / p95: L1 on {statistics.median(on):.1f} / "
          f"{pct(on, 0.95):.1f} ms, off {statistics.median(off):.1f} / {pct(off, 0.95):.1f} ms "
          f"(on / off {statistics.median(on) / statistics.median(off):.2f}x)")
    updates = sum(r["update"] for r in seen["on"])
    print(f"the update on the step's own stream: {updates} of {turns} steps")
    print("\nprompt tokens per turn, L1 on (means over the chats): turn | runtime_memory | tail")
    for t in sorted({r["turn"] for r in seen["on"]}):
        rows = [r["sections"] for r in seen["on"] if r["turn"] == t]
        if t in (0, 1, 4, 9, args.turns - 1):
            l1_tokens = statistics.mean(s.get("runtime_memory", 0) for s in rows)
            tail = statistics.mean(s.get("tail", 0) for s in rows)
            print(f"{t + 1:>5} | {l1_tokens:>14.0f} | {tail:>5.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-delay", type=float, default=0.01)
    parser.add_argument("--control", action="store_true",
                        help="both workers with L1 off: what the on/off ratio is without L1")
    args = parser.parse_args()
    run(args, junk=False)
    if not args.control:
        run(args, junk=True)


if __name__ == "__main__":
    main()

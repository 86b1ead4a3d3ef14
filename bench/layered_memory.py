"""What layered runtime memory costs: helper calls and tokens per 100 turns (L1, L2, L3), the
latency it adds to `message_end`, its tokens in the prompt against the tail's, and rejections of
a junk helper.

    .venv/bin/python bench/layered_memory.py [--chats 5] [--turns 20] [--chunks 20]
        [--chunk-delay 0.01] [--control]

Two `jin serve` workers on one Postgres, one with the layers on (L1, L2 with JIN's default rule,
L3 snapshots) and one with them off, stepped in turn: each turn of each chat goes to a chat on
either worker, so both meet the machine alike. One fake model serves every role (in this
process: it counts what it was asked). The brain streams `--chunks` chunks `--chunk-delay` s
apart, a model's pace; the helper answers as a helper model would: an L1 rewrite keeps the
previous state and adds a line for the new turn (at most 12 lines); an L2 distillation names one
pattern with a quote of the user's first message in its window; an L3 digest restates the
state's first lines. The turns are a synthetic conversation: a user telling about themselves,
their plans and their questions. At the end each chat on the layered worker saves one snapshot
(`POST /v1/chats/{id}/snapshots`).

Printed:
- helper calls and helper tokens per 100 turns for L1, L2 and L3 (prompt tokens counted with
  cl100k, as jin counts its prompts; the answer's too);
- the time to `message_end` at the client, p50 and p95, layers on and off, and their ratio (the
  updates run after `message_end`: the target is no difference);
- how often the L1 update reached the step's own stream (before `step_end`);
- the prompt's L1 and L2 tokens (the `runtime_memory` and `runtime_patterns` sections of the
  `context` event) against the tail's, at some turns;
- then the same turns with a helper that answers junk (a line cut off), for L1, then for L2
  and L3: the rejections counted by `jin_runtime_memory_rejections_total` and
  `jin_runtime_patterns_rejections_total`, by reason, and how the snapshots fared.
`--control` runs both workers with the layers off: the ratio's noise. Figures only: it never
passes or fails.
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
from memory.events.schema import load_schemas  # noqa: E402
from memory.pattern_prompt import HELPER_SYSTEM as L2_SYSTEM  # noqa: E402
from memory.runtime_prompt import HELPER_SYSTEM as L1_SYSTEM  # noqa: E402
from memory.session_digest import DIGEST_SYSTEM as L3_SYSTEM  # noqa: E402

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


LAYERS = {"L1": L1_SYSTEM, "L2": L2_SYSTEM, "L3": L3_SYSTEM}
EXTRACTION = "You extract memory from a conversation"  # memory/events/prompt.py, its start


def layer_of(messages: list[dict[str, Any]]) -> str | None:
    """Which layer's request this is (`events` for an extraction), None for the brain's."""
    first = messages[0].get("content") if messages else None
    if isinstance(first, str) and first.startswith(EXTRACTION):
        return "events"
    return next((name for name, system in LAYERS.items() if first == system), None)


class HelperStandIn:
    """The helper's answer to a layer's request (None for anything else: the fake's echo), and
    every answer it gave, by layer."""

    def __init__(self, junk: frozenset[str]) -> None:
        self.junk = junk  # the layers it answers junk
        self.answers: dict[str, list[str]] = {name: [] for name in [*LAYERS, "events"]}

    def __call__(self, messages: list[dict[str, Any]]) -> Reply | None:
        layer = layer_of(messages)
        if layer is None:
            return None
        prompt = str(messages[-1].get("content", ""))
        if layer in self.junk and layer == "L3":
            answer = ""  # a digest that says nothing
        elif layer in self.junk:  # cut off mid-line, as a helper that hit its token limit
            answer = "user_name: Ann\ncurrent_task: plan a trip to ("
        elif layer == "L1":
            state = prompt.split("Current state:\n", 1)[-1].split("\n\n", 1)[0]
            lines = [] if state.strip() == "(none)" else state.splitlines()
            for line in prompt.splitlines():
                if line.startswith("User: "):
                    words = [w.strip(",.?!").lower() for w in line[6:].split()][:6]
                    lines.append(f"turn_{len(lines) + 1}_said: {' '.join(words)}")
            answer = "\n".join(lines[-12:])
        elif layer == "events":  # one event of the batch's first turns
            answer = json.dumps({
                "segments": [{"start": 0, "end": 1, "topic": "plans"}],
                "events": [{"type": "profile_fact", "topic": "plans",
                            "properties": {"attribute": "plan", "value": "a trip"}}],
                "entities": []})
        elif layer == "L2":
            said = prompt.split("User messages:\n", 1)[-1].split("\n", 1)[0]
            quote = " ".join(said.split(". ", 1)[-1].split()[:5])
            answer = f'repetition | medium | the user comes back to a subject | "{quote}"'
        else:
            notes = prompt.split("Running notes:\n", 1)[-1].split("\n\n", 1)[0]
            answer = "The session so far: " + "; ".join(notes.splitlines()[:3]) + "."
        self.answers[layer].append(answer)
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


async def conversation(urls: dict[str, str], chats: int, turns: int
                       ) -> tuple[dict[str, list[dict]], int, int]:
    """Each turn of each chat on both workers; then a snapshot of each of the first worker's
    chats (the number saved, and of those with jin's own digest)."""
    rng = random.Random(11)
    seen: dict[str, list[dict]] = {name: [] for name in urls}
    clients = {name: httpx.AsyncClient(base_url=url, timeout=120) for name, url in urls.items()}
    try:
        ids: dict[str, list[str]] = {name: [] for name in urls}
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
        for _ in range(600):  # the last batches' extraction, in the background
            status = (await clients["on"].get("/v1/status")).json()["memory"]
            if not status.get("extraction", {}).get("pending"):
                break
            await asyncio.sleep(0.1)
        saved = fallback = 0
        for chat in ids["on"]:
            r = await clients["on"].post(f"/v1/chats/{chat}/snapshots", json={})
            saved += r.status_code == 201
            fallback += r.status_code == 201 and r.json()["digest_source"] == "fallback"
    finally:
        for client in clients.values():
            await client.aclose()
    return seen, saved, fallback


def rejections(url: str) -> Counter[str]:
    text = httpx.get(f"{url}/metrics").text
    out: Counter[str] = Counter()
    for line in text.splitlines():
        for layer, metric in (("L1", "jin_runtime_memory_rejections_total{"),
                              ("L2", "jin_runtime_patterns_rejections_total{")):
            if line.startswith(metric):
                reason = line.split('reason="', 1)[1].split('"', 1)[0]
                out[f"{layer} {reason}"] += int(float(line.rsplit(" ", 1)[1]))
    return out


def run(args: argparse.Namespace, junk: frozenset[str] = frozenset()) -> None:
    counter = TiktokenCounter()
    helper = HelperStandIn(junk)
    fake = FakeOpenAIServer(echo_chunks=args.chunks, echo_chunk_delay=args.chunk_delay,
                            respond=helper)
    model_url = fake.start()
    try:
        with ExitStack() as stack:
            db = database(stack)
            first = "false" if args.control else "true"  # the control: both off
            urls = {"on": jin_worker(stack, db, model_url, JIN_RUNTIME_MEMORY=first,
                                     JIN_EVENTS_ENABLED=first),
                    "off": jin_worker(stack, db, model_url, JIN_RUNTIME_MEMORY="false")}
            seen, saved, fallback = asyncio.run(conversation(urls, args.chats, args.turns))
            rejected = rejections(urls["on"])
    finally:
        fake.stop()
    calls = {name: [b for b in fake.requests if layer_of(b["messages"]) == name]
             for name in [*LAYERS, "events"]}
    turns = len(seen["on"])
    if junk:
        print(f"\na helper answering junk for {', '.join(sorted(junk))}, over {turns} turns: "
              f"L1 {len(calls['L1'])} calls, L2 "
              f"{len(calls['L2'])}, L3 {len(calls['L3'])}; rejected: "
              f"{dict(rejected) or 'none'}; snapshots saved: {saved} of {args.chats}, "
              f"{fallback} with the digest jin writes from the L1 lines (a chat whose L1 kept "
              f"no line has nothing to save: 409 snapshot_empty)")
        return
    per100 = 100 / turns
    print(f"{args.chats} chats x {args.turns} turns on each worker; the brain streams "
          f"{args.chunks} chunks {args.chunk_delay * 1000:.0f} ms apart; then one snapshot of "
          f"each chat ({saved} saved)\n")
    print("helper, per 100 turns: layer | calls | prompt tokens | answer tokens (a call)")
    for name, asked in calls.items():
        prompt = sum(sum(counter.count(str(m.get("content", ""))) for m in b["messages"])
                     for b in asked)
        answer = sum(counter.count(a) for a in helper.answers[name])
        n = max(len(asked), 1)
        print(f"{name:>6} | {len(asked) * per100:5.1f} | {prompt * per100:13,.0f} | "
              f"{answer * per100:13,.0f} ({prompt / n:.0f} + {answer / n:.0f})")
    schemas = load_schemas()
    kinds = len(schemas.events) + len(schemas.entities)
    print(f"events: one call a batch for every schema ({len(schemas.events)} event types, "
          f"{len(schemas.entities)} entity types); one call per schema would be "
          f"{len(calls['events']) * kinds * per100:.0f} per 100 turns")
    on = [r["message_end_ms"] for r in seen["on"]]
    off = [r["message_end_ms"] for r in seen["off"]]
    print(f"\ntime to message_end, p50 / p95: layers on {statistics.median(on):.1f} / "
          f"{pct(on, 0.95):.1f} ms, off {statistics.median(off):.1f} / {pct(off, 0.95):.1f} ms "
          f"(on / off {statistics.median(on) / statistics.median(off):.2f}x)")
    updates = sum(r["update"] for r in seen["on"])
    print(f"the L1 update on the step's own stream: {updates} of {turns} steps")
    print("\nprompt tokens, layers on (means over the chats): turn | runtime_memory | "
          "runtime_patterns | tail")
    for t in sorted({r["turn"] for r in seen["on"]}):
        rows = [r["sections"] for r in seen["on"] if r["turn"] == t]
        if t in (0, 1, 4, 9, args.turns - 1):
            l1 = statistics.mean(s.get("runtime_memory", 0) for s in rows)
            l2 = statistics.mean(s.get("runtime_patterns", 0) for s in rows)
            tail = statistics.mean(s.get("tail", 0) for s in rows)
            print(f"{t + 1:>5} | {l1:>14.0f} | {l2:>16.0f} | {tail:>5.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=5)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-delay", type=float, default=0.01)
    parser.add_argument("--control", action="store_true",
                        help="both workers with the layers off: the on/off ratio's noise")
    args = parser.parse_args()
    run(args)
    if not args.control:
        run(args, junk=frozenset({"L1"}))
        run(args, junk=frozenset({"L2", "L3"}))


if __name__ == "__main__":
    main()

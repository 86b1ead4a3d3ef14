"""The OpenAI-compatible endpoint's overhead over the native step, side by side.

Runs a real `jin serve` worker against the fake OpenAI-compatible server (zero delay) and a real
Postgres, on loopback. Two kinds of conversation, stepped in turn so that drift hits both alike:

- native: `POST /v1/chats/{id}/messages {"content"}` on a chat made beforehand;
- openai: `POST /v1/chat/completions` as an OpenAI app sends it, the whole history each time
  (system prompt, every earlier question and answer, the new question), no chat id: jin derives
  the chat, reads the end of its conversation, stores only the new question, runs the same step.

Both are asked for JSON (no stream). For each, the worker's own time on the request (its
`Server-Timing`, routing and validation included); the model's time is the same fake's on both
sides, so the difference of the medians is what the endpoint adds. Prints medians, p90s, the
difference and the ratio, and the client's round trips. Never passes or fails on time.

`--base REV|DIR`: the same again at once for another version of jin (a git revision, checked
out into a temporary worktree, or a directory), with its own Postgres and worker, its steps
interleaved with this tree's: before and after a change, side by side in one run.

    .venv/bin/python bench/openai_overhead.py [--chats 10] [--turns 20] [--rounds 3] [--base REV]
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
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import database, fake_model, jin_worker  # noqa: E402

SYSTEM = "Be brief."
FILLER = " ".join(f"lorem{i % 17}" for i in range(30))  # as bench/step_overhead.py's questions


def server_ms(response: httpx.Response) -> float:
    if response.status_code != 200:
        raise RuntimeError(f"step failed: {response.status_code} {response.text[:300]}")
    return float(response.headers["server-timing"].partition("dur=")[2])


async def native_turn(client: httpx.AsyncClient, chat_id: str, question: str) -> tuple[float,
                                                                                        float]:
    t0 = time.perf_counter()
    r = await client.post(f"/v1/chats/{chat_id}/messages", json={"content": question})
    return server_ms(r), (time.perf_counter() - t0) * 1000


async def openai_turn(
    client: httpx.AsyncClient, history: list[dict[str, Any]], question: str
) -> tuple[float, float]:
    history.append({"role": "user", "content": question})
    t0 = time.perf_counter()
    r = await client.post("/v1/chat/completions", json={
        "model": "jin", "user": history[0]["user"], "messages": history[1:]})
    client_ms = (time.perf_counter() - t0) * 1000
    ms = server_ms(r)
    if r.headers.get("x-jin-history") == "reset":
        raise RuntimeError("the resent history was taken for an edit")
    history.append({"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]})
    return ms, client_ms


async def round_(
    workers: dict[str, str], chats: int, turns: int
) -> dict[str, dict[str, dict[str, list[float]]]]:
    """One round on each worker (name: URL), their steps interleaved, the order rotating."""
    out = {name: {side: {"server": [], "client": []} for side in ("native", "openai")}
           for name in workers}
    clients = {name: httpx.AsyncClient(base_url=url, timeout=60) for name, url in workers.items()}
    try:
        native: dict[str, list[str]] = {name: [] for name in workers}
        conversations: dict[str, list[list[dict[str, Any]]]] = {name: [] for name in workers}
        for name, client in clients.items():
            for _ in range(chats):
                user = f"bench-{uuid.uuid4().hex[:12]}"  # a user per chat, as in production
                made = await client.post("/v1/chats",
                                         json={"user_id": user, "system_prompt": SYSTEM})
                native[name].append(made.json()["id"])
                # (the first entry carries the user; the rest is what the app sends)
                conversations[name].append([{"user": f"{user}-oai"},
                                            {"role": "system", "content": SYSTEM}])
        order = [(name, side) for name in workers for side in ("native", "openai")]
        for turn in range(turns):
            for i in range(chats):
                question = f"question {turn} of chat {i} {FILLER}"
                shift = (turn + i) % len(order)
                for name, side in order[shift:] + order[:shift]:
                    if side == "native":
                        s, c = await native_turn(clients[name], native[name][i], question)
                    else:
                        s, c = await openai_turn(clients[name], conversations[name][i],
                                                 question)
                    if turn > 0:  # the first turn of each chat makes it: warm-up
                        out[name][side]["server"].append(s)
                        out[name][side]["client"].append(c)
    finally:
        for client in clients.values():
            await client.aclose()
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=10)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", help="another version, side by side: git revision or directory")
    args = parser.parse_args()
    with ExitStack() as stack:
        url = database(stack)
        model = fake_model(stack)
        workers = {"this tree": jin_worker(stack, url, model)}
        if args.base:
            from bench.side_by_side import Side, checkout, own_database, start_worker

            base = Side("base", checkout(stack, args.base))
            own_database(stack, base)
            start_worker(stack, base, model)
            workers = {f"base {args.base}": base.url, **workers}
        rows: dict[str, list[tuple[float, float]]] = {name: [] for name in workers}
        for r in range(args.rounds):
            got = asyncio.run(round_(workers, args.chats, args.turns))
            for name, sides in got.items():
                nat, oai = sides["native"], sides["openai"]
                n, o = statistics.median(nat["server"]), statistics.median(oai["server"])
                rows[name].append((n, o))
                print(f"round {r + 1}, {name}: {len(nat['server'])} steps a side; worker's "
                      f"time native {n:.2f} ms (p90 {pct(nat['server'], 0.9):.2f}), openai "
                      f"{o:.2f} ms (p90 {pct(oai['server'], 0.9):.2f}); +{o - n:.2f} ms, "
                      f"{o / n:.2f}x; client round trip native "
                      f"{statistics.median(nat['client']):.2f} ms, openai "
                      f"{statistics.median(oai['client']):.2f} ms")
        print()
        for name, pairs in rows.items():
            n = statistics.median(p[0] for p in pairs)
            o = statistics.median(p[1] for p in pairs)
            diffs = [p[1] - p[0] for p in pairs]
            print(f"{name}, median of {args.rounds} rounds: native {n:.2f} ms, openai {o:.2f} "
                  f"ms: the endpoint adds {statistics.median(diffs):.2f} ms ({min(diffs):.2f} - "
                  f"{max(diffs):.2f}), ratio {o / n:.2f}x (target: within 1 ms)")


if __name__ == "__main__":
    main()

"""Load: jin workers behind a balancer, many concurrent chats of streamed steps, then an audit.

    python -m bench.load [--chats 200] [--steps 20] [--ttft 0.3] [--tokens 30]
                         [--token-interval 0.02] [--json FILE]

On loopback: one Postgres (embedded, or DATABASE_URL), the fake OpenAI-compatible server
(llm/testing.py) as brain, helper and embedder with a model's delays (time to first token,
then tokens at a steady rate; a delay per embedding), two `jin serve` processes, and
bench/balancer.py in front of them. Each chat posts its steps one after another, each a streamed
SSE POST with an idempotency key; a 409/429/5xx or a broken connection is retried with the same
key, as a client should. Reports steps/s, time to first token (the client's, and the server's
own share of it from the `timings` of `step_end`), errors by code, the audit (chat/audit.py) and
a count of every chat's messages. Prints figures; never passes or fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from bench.harness import balancer, database, fake_model, jin_worker
from bench.step_overhead import FILLER, pct
from chat.audit import audit
from db.engine import create_engine

SSE = {"Accept": "text/event-stream"}
RETRY_STATUS = {409, 429, 500, 502, 503, 504}  # safe to retry: the idempotency key dedupes


@dataclass
class Seen:
    """What one streamed step showed the client."""

    live: bool = False  # a `context` event: the step ran now (a replay of a stored one has none)
    client_ttft_ms: float | None = None
    status: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # message_error codes


@dataclass
class Tally:
    done: int = 0
    replayed: int = 0  # steps whose answer came back from a retry, as stored
    client_ttft: list[float] = field(default_factory=list)
    server_share: list[float] = field(default_factory=list)  # first_token - model's - embed
    client_share: list[float] = field(default_factory=list)  # client TTFT - model's - embed
    model_ttft: list[float] = field(default_factory=list)  # model request -> first delta
    overhead: list[float] = field(default_factory=list)  # total - model, the whole step
    step_ms: list[float] = field(default_factory=list)  # client: POST -> end of the stream
    errors: Counter[str] = field(default_factory=Counter)
    client_cpu_s: float = 0.0  # this process's CPU over the run: the load generator's own cost
    sent: Counter[str] = field(default_factory=Counter)  # per chat: steps (keys) posted
    acked: Counter[str] = field(default_factory=Counter)  # per chat: steps that reached step_end

    def add(self, chat_id: str, seen: Seen, step_ms: float) -> None:
        self.done += 1
        self.acked[chat_id] += 1
        self.step_ms.append(step_ms)
        if seen.status != "complete":
            self.errors[f"step status {seen.status}"] += 1
        for code in seen.errors:
            self.errors[f"message_error {code}"] += 1
        if not seen.live:
            self.replayed += 1  # its timings are the original run's: not counted again
            return
        t = seen.timings
        self.overhead.append(t["overhead_ms"])
        if seen.client_ttft_ms is None or "first_token_ms" not in t:
            return
        model = t["model_first_token_ms"] + t["embed_ms"]
        self.client_ttft.append(seen.client_ttft_ms)
        self.model_ttft.append(t["model_first_token_ms"])
        self.server_share.append(t["first_token_ms"] - model)
        self.client_share.append(seen.client_ttft_ms - model)


async def read_stream(response: httpx.Response, t0: float) -> Seen | None:
    """The step's events as they arrive; None when the stream ends before `step_end`. Read to
    the end, so that the connection goes back to the pool (httpx closes one left unread)."""
    seen, name, ended = Seen(), "", False
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            name = line.partition(":")[2].strip()
            if name in ("message_chunk", "thinking_chunk") and seen.client_ttft_ms is None:
                seen.client_ttft_ms = (time.perf_counter() - t0) * 1000
        elif line.startswith("data:"):
            data = json.loads(line.partition(":")[2])
            if name == "context":
                seen.live = True
            elif name == "message_error":
                seen.errors.append(data["code"])
            elif name == "step_end":
                seen.status, seen.timings, ended = data["status"], data["timings"], True
    return seen if ended else None


async def problem_code(response: httpx.Response) -> str:
    try:
        return str(json.loads(await response.aread()).get("code", ""))
    except (ValueError, AttributeError):
        return ""  # not a problem document (a proxy's page, an empty body)


async def step(
    client: httpx.AsyncClient, chat_id: str, n: int, tally: Tally, retries: int,
    attempt_limit: float,
) -> None:
    """One step, retried with its idempotency key; each attempt, its stream read whole, within
    `attempt_limit` seconds (httpx's own timeouts bound each read, not a whole stream)."""
    body = {"content": f"question {n} {FILLER}", "idempotency_key": f"{chat_id}:{n}"}
    tally.sent[chat_id] += 1
    for attempt in range(retries + 1):
        pause = min(0.25 * 2**attempt, 4.0)
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(attempt_limit), client.stream(
                "POST", f"/v1/chats/{chat_id}/messages", json=body, headers=SSE
            ) as r:
                if r.status_code != 200:
                    tally.errors[f"HTTP {r.status_code} {await problem_code(r)}".strip()] += 1
                    if r.status_code not in RETRY_STATUS:
                        return
                    pause = float(r.headers.get("Retry-After", pause))
                    await asyncio.sleep(pause)
                    continue
                seen = await read_stream(r, t0)
        except (httpx.HTTPError, TimeoutError) as exc:
            tally.errors[f"connection {type(exc).__name__}"] += 1
            await asyncio.sleep(pause)
            continue
        if seen is None:
            tally.errors["stream ended before step_end"] += 1
            await asyncio.sleep(pause)
            continue
        tally.add(chat_id, seen, (time.perf_counter() - t0) * 1000)
        return
    tally.errors[f"gave up after {retries + 1} attempts"] += 1


async def progress(tally: Tally, total: int, t0: float) -> None:
    while True:
        await asyncio.sleep(1.0)
        elapsed = time.perf_counter() - t0
        print(f"\r  {tally.done:>6,}/{total:,} steps  {tally.done / elapsed:6.1f} steps/s  "
              f"{sum(tally.errors.values())} errors  {elapsed:5.0f} s", end="", file=sys.stderr,
              flush=True)


async def drive(args: argparse.Namespace, url: str) -> tuple[list[str], Tally, float]:
    # A client of its own for each chat, as each user's app holds one: its one connection kept
    # between its steps. One client for all would hold every connection in one pool, whose
    # bookkeeping (httpcore 1.0) walks all of them for each request: the load generator's CPU
    # a step at 100 chats 15.6 ms that way, 9.8 ms this way. The whole of each attempt is
    # bounded by --timeout (step).
    def client() -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=url, timeout=args.timeout,
                                 limits=httpx.Limits(max_connections=1, keepalive_expiry=4.0))

    async with client() as setup:
        chats = []
        for i in range(args.chats):
            # A user per chat: each step recalls over its own user's past.
            user = f"load-{i}-{uuid.uuid4().hex[:8]}"
            r = await setup.post("/v1/chats", json={"user_id": user,
                                                    "system_prompt": "Be brief."})
            r.raise_for_status()
            chats.append(r.json()["id"])
    tally, rng = Tally(), random.Random(0)

    async def chat(chat_id: str, start: float) -> None:
        await asyncio.sleep(start)  # users do not all arrive in the same millisecond
        async with client() as own:
            for n in range(args.steps):
                await step(own, chat_id, n, tally, args.retries, args.timeout)

    t0, cpu0 = time.perf_counter(), time.process_time()
    ticker = asyncio.create_task(progress(tally, args.chats * args.steps, t0))
    await asyncio.gather(*(chat(c, rng.uniform(0, args.ramp)) for c in chats))
    elapsed = time.perf_counter() - t0
    tally.client_cpu_s = time.process_time() - cpu0
    ticker.cancel()
    print(file=sys.stderr)
    return chats, tally, elapsed


_COUNTS = text("""
SELECT c.id::text,
       count(m.id) FILTER (WHERE m.kind = 'user'),
       count(m.id) FILTER (WHERE m.kind = 'assistant'),
       count(m.id) FILTER (WHERE m.kind = 'assistant' AND m.status = 'complete')
FROM chats c LEFT JOIN messages m ON m.chat_id = c.id
WHERE c.id = ANY(CAST(:ids AS uuid[]))
GROUP BY c.id""")


async def check(db_url: str, chats: list[str], steps: int, tally: Tally) -> dict[str, Any]:
    """The audit over the whole database, and every chat's turns counted: lost when fewer than
    the steps its client saw end, duplicated when more than the steps it posted (one per
    idempotency key, however many retries)."""
    engine = create_engine(db_url, pool_size=1)
    try:
        found = await audit(engine)
        async with engine.connect() as conn:
            rows = (await conn.execute(_COUNTS, {"ids": chats})).all()
    finally:
        await engine.dispose()
    off = [r for r in rows if (r[1], r[2], r[3]) != (steps, steps, steps)]
    return {
        "audit": found.to_json(),
        "chats": len(chats),
        "chats_found": len(rows),
        "chats_exact": len(rows) - len(off),
        "user_lost": sum(max(0, tally.acked[r[0]] - r[1]) for r in rows),
        "user_duplicated": sum(max(0, r[1] - tally.sent[r[0]]) for r in rows),
        "assistant_lost": sum(max(0, tally.acked[r[0]] - r[2]) for r in rows),
        "assistant_duplicated": sum(max(0, r[2] - tally.sent[r[0]]) for r in rows),
        "assistant_not_complete": sum(r[2] - r[3] for r in rows),
        "off_samples": [{"chat": r[0], "user": r[1], "assistant": r[2], "complete": r[3]}
                        for r in off[:5]],
    }


def spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "n": 0}
    return {"p50": round(pct(values, 0.5), 2), "p99": round(pct(values, 0.99), 2),
            "n": len(values)}


def report(config: dict[str, Any], tally: Tally, elapsed: float, checked: dict[str, Any]) -> dict:
    return {
        "config": config,
        "steps": tally.done,
        "seconds": round(elapsed, 2),
        "steps_per_s": round(tally.done / elapsed, 1),
        # It shares the machine's cores with the workers: what it costs is theirs no more.
        "client_cpu_ms_per_step": round(tally.client_cpu_s / max(tally.done, 1) * 1000, 3),
        "replayed": tally.replayed,
        "client_ttft_ms": spread(tally.client_ttft),
        "server_ttft_share_ms": spread(tally.server_share),
        "client_ttft_share_ms": spread(tally.client_share),
        "model_ttft_ms": spread(tally.model_ttft),
        "step_overhead_ms": spread(tally.overhead),
        "client_step_ms": spread(tally.step_ms),
        "errors": dict(tally.errors.most_common()),
        **checked,
    }


def print_table(r: dict[str, Any]) -> None:
    def ms(key: str) -> str:
        s = r[key]
        return "-" if s["p50"] is None else f"{s['p50']:.1f} / {s['p99']:.1f} ms"

    a = r["audit"]
    rows = [
        ("steps", f"{r['steps']:,} in {r['seconds']:.1f} s ({r['replayed']} replayed on a retry)"),
        ("steps/s", f"{r['steps_per_s']:.1f}"),
        ("load generator CPU a step", f"{r['client_cpu_ms_per_step']:.2f} ms"),
        ("client TTFT p50 / p99", ms("client_ttft_ms")),
        ("server's share of TTFT p50 / p99", ms("server_ttft_share_ms")),
        ("client TTFT - model TTFT - embed, p50 / p99", ms("client_ttft_share_ms")),
        ("model TTFT seen by the worker p50 / p99", ms("model_ttft_ms")),
        ("step overhead (total - model) p50 / p99", ms("step_overhead_ms")),
        ("client step time p50 / p99", ms("client_step_ms")),
        ("errors", ", ".join(f"{k}: {v}" for k, v in r["errors"].items()) or "none"),
        ("audit", "clean" if a["clean"] else json.dumps(a["findings"])),
        ("audit rows looked at", ", ".join(f"{k} {v:,}" for k, v in a["rows"].items())),
        (f"chats with {r['config']['steps']} user + {r['config']['steps']} complete answers",
         f"{r['chats_exact']} / {r['chats']}"),
        ("lost / duplicated turns", f"user {r['user_lost']} / {r['user_duplicated']}, assistant "
         f"{r['assistant_lost']} / {r['assistant_duplicated']}, not complete "
         f"{r['assistant_not_complete']}"),
    ]
    width = max(len(k) for k, _ in rows)
    print("\n| " + "figure".ljust(width) + " | value |\n|" + "-" * (width + 2) + "|---|")
    for k, v in rows:
        print(f"| {k.ljust(width)} | {v} |")
    if r["off_samples"]:
        print("chats off count:", json.dumps(r["off_samples"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--steps", type=int, default=20, help="steps per chat")
    parser.add_argument("--workers", type=int, default=2, help="jin serve processes")
    parser.add_argument("--ttft", type=float, default=0.3,
                        help="the fake model's time to first token, s")
    parser.add_argument("--tokens", type=int, default=30, help="chunks per answer")
    parser.add_argument("--token-interval", type=float, default=0.02,
                        help="s between chunks (0.02 = 50 tokens/s)")
    parser.add_argument("--embed-delay", type=float, default=0.02, help="s per embedding call")
    parser.add_argument("--ramp", type=float, default=1.0, help="chats start within this, s")
    parser.add_argument("--retries", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=120.0, help="per request, s")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON there")
    args = parser.parse_args()
    # The bench is one client standing for many users: a per-key rate limit would throttle the
    # bench, not measure the server; the per-worker step cap is raised so that every chat is
    # served (set either in the environment to measure with it).
    worker_env = {"JIN_RATE_LIMIT_PER_MINUTE": "0", "JIN_MAX_CONCURRENT_STEPS": str(args.chats)}
    worker_env = {k: os.environ.get(k, v) for k, v in worker_env.items()}
    config = {
        "chats": args.chats, "steps": args.steps, "workers": args.workers,
        "fake_ttft_s": args.ttft, "fake_tokens": args.tokens,
        "fake_token_interval_s": args.token_interval, "fake_embed_delay_s": args.embed_delay,
        "ramp_s": args.ramp, "database": "DATABASE_URL" if os.environ.get("DATABASE_URL")
        else "embedded", "cores": os.cpu_count(), "worker_env": worker_env,
    }
    print(f"load: {json.dumps(config)}", flush=True)
    with ExitStack() as stack:
        db_url = database(stack)
        model_url = fake_model(stack, chunks=args.tokens, chunk_delay=args.token_interval,
                               first_token_delay=args.ttft, embed_delay=args.embed_delay)
        workers = [jin_worker(stack, db_url, model_url, **worker_env)
                   for _ in range(args.workers)]
        url = balancer(stack, workers)
        print(f"balancer {url} -> {' '.join(workers)}; fake model {model_url}", file=sys.stderr)
        chats, tally, elapsed = asyncio.run(drive(args, url))
        checked = asyncio.run(check(db_url, chats, args.steps, tally))
    result = report(config, tally, elapsed, checked)
    print_table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""The least a step can cost on the design card's stack, beside jin's step in the same run.

The floor is a FastAPI route under uvicorn, timed the way jin's worker is (`Server-Timing` from
the request's arrival to its answer's first byte, less the model's time), that does only what any
memory service's step must: write the user's message durably before the model is asked (so a
provider failure keeps it), read the chat's newest rows, stream the model's answer through httpx,
and write the answer durably. It uses jin's tables, its engine (`db.engine.create_engine`) and the
project's fake model; no recall, no compaction, no token counts, no step row, no lease.

    .venv/bin/python bench/stack_floor.py [--steps 300] [--rounds 3]

Steps alternate between the floor and a real `jin serve` worker (memory on, as
bench/step_overhead.py runs it), one step each in turn, so drift hits both alike. Prints the
median and p99 of each, their ratio, and the ratio each has to a peer figure given with
`--peer-ms` (bench/peer_langgraph.py's median on the same machine). Never passes or fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from pydantic import BaseModel
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import database, fake_model, free_port, jin_worker, spawn  # noqa: E402
from bench.step_overhead import FILLER, client_session, pct, step  # noqa: E402
from db.engine import create_engine  # noqa: E402

TAIL = 20  # the newest rows the floor reads back, about what a 10-message chat's tail holds
GAP = 1024  # chat.types.POSITION_GAP
STEPS_A_CHAT = 8  # so a chat ends near 16 messages

_WRITE = text("""
WITH c AS (UPDATE chats SET last_position = last_position + :gap, updated_at = now()
           WHERE id = :chat RETURNING last_position)
INSERT INTO messages (id, chat_id, position, kind, content)
SELECT :id, :chat, c.last_position, :kind, :content FROM c
""")
_TAIL = text("""
SELECT kind, content FROM messages WHERE chat_id = :chat
ORDER BY position DESC LIMIT :n
""")


class _Body(BaseModel):
    content: str


class _Timing:
    """`Server-Timing: app;dur=<ms>`, from the request's arrival to its answer's first byte: a
    plain ASGI middleware, as jin's (api/app.py)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        arrived = time.perf_counter()

        async def timed_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                took = f"app;dur={(time.perf_counter() - arrived) * 1000:.3f}"
                message = {**message, "headers": [*message.get("headers", []),
                                                  (b"server-timing", took.encode())]}
            await send(message)

        await self.app(scope, receive, timed_send)


def floor_app(database_url: str, model_url: str) -> FastAPI:
    """The floor's app: one route, one engine, one httpx client."""
    app = FastAPI()
    engine = create_engine(database_url)
    model = httpx.AsyncClient(base_url=model_url, timeout=httpx.Timeout(30, connect=5),
                              limits=httpx.Limits(max_connections=64))

    app.add_middleware(_Timing)  # type: ignore[arg-type]

    @app.get("/readyz")
    async def ready() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/chats/{chat_id}/messages")
    async def messages(chat_id: uuid.UUID, body: _Body) -> dict[str, Any]:
        async with engine.begin() as conn:  # the user's message, durable before the model
            await conn.execute(_WRITE, {"gap": GAP, "chat": chat_id, "id": uuid.uuid4(),
                                        "kind": "user", "content": body.content})
            rows = (await conn.execute(_TAIL, {"chat": chat_id, "n": TAIL})).all()
        prompt = [{"role": "assistant" if kind == "assistant" else "user", "content": content}
                  for kind, content in reversed(rows)]
        started = time.perf_counter()
        answer = []
        async with model.stream("POST", "/chat/completions", json={
            "model": "fake", "messages": prompt, "stream": True,
        }) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    for choice in json.loads(line[6:]).get("choices", []):
                        answer.append(choice.get("delta", {}).get("content") or "")
        model_ms = (time.perf_counter() - started) * 1000
        async with engine.begin() as conn:  # the answer, durable
            await conn.execute(_WRITE, {"gap": GAP, "chat": chat_id, "id": uuid.uuid4(),
                                        "kind": "assistant", "content": "".join(answer)})
        return {"status": "complete", "timings": {"model_ms": model_ms}}

    return app


def floor_worker(stack: ExitStack, database_url: str, model_url: str) -> str:
    port = free_port()
    spawn(stack, ["-m", "uvicorn", "--factory", "bench.stack_floor:served", "--port", str(port),
                  "--log-level", "warning", "--no-access-log"],
          {"JIN_FLOOR_DATABASE": database_url, "JIN_FLOOR_MODEL": model_url},
          f"http://127.0.0.1:{port}|/readyz")
    return f"http://127.0.0.1:{port}"


def served() -> FastAPI:
    """uvicorn's factory: the floor on the database and model its environment names."""
    return floor_app(os.environ["JIN_FLOOR_DATABASE"], os.environ["JIN_FLOOR_MODEL"])


async def floor_step(client: httpx.AsyncClient, chat_id: str, i: int) -> float:
    r = await client.post(f"/chats/{chat_id}/messages", json={"content": f"question {i} {FILLER}"})
    r.raise_for_status()
    return float(r.headers["server-timing"].partition("dur=")[2]) - r.json()["timings"]["model_ms"]


async def chats(jin: httpx.AsyncClient, n: int) -> tuple[list[str], list[str]]:
    """`n` new chats for each side, a user each (the floor's made through jin, its tables)."""
    made: tuple[list[str], list[str]] = ([], [])
    for _ in range(n):
        user = f"floor-{uuid.uuid4().hex[:12]}"
        for side in made:
            r = await jin.post("/v1/chats", json={"user_id": user, "system_prompt": "Be brief."})
            side.append(r.json()["id"])
    return made


async def measure(args: argparse.Namespace, jin_url: str, floor_url: str) -> None:
    async with client_session(jin_url) as jin, client_session(floor_url) as floor:
        jin_chats, floor_chats = await chats(jin, 5)
        for i in range(10):  # warm-up: pools open, statements prepared
            await step(jin, jin_chats[i % 5], -i)
            await floor_step(floor, floor_chats[i % 5], -i)
        for round_ in range(1, args.rounds + 1):
            # New chats each round, each stepped STEPS_A_CHAT times at most, so that every chat
            # stays near 10 messages (bench/step_overhead.py's smallest size), as does what
            # its user has indexed for recall to rank.
            n = -(-args.steps // STEPS_A_CHAT)
            jin_chats, floor_chats = await chats(jin, n)
            times: dict[str, list[float]] = {"jin": [], "floor": []}
            for i in range(args.steps):
                times["jin"].append((await step(jin, jin_chats[i % n], i))[0])
                times["floor"].append(await floor_step(floor, floor_chats[i % n], i))
            report(round_, times, args.peer_ms)


def report(round_: int, times: dict[str, list[float]], peer_ms: float | None) -> None:
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"round {round_}, {len(times['jin'])} steps each, alternating:")
    for name, values in times.items():
        line = f"  {name:>5}: median {medians[name]:6.2f} ms, p99 {pct(values, 0.99):6.2f} ms"
        if peer_ms:
            line += f", {peer_ms / medians[name]:.2f}x below the peer's {peer_ms:.2f} ms"
        print(line)
    print(f"  jin / floor: {medians['jin'] / medians['floor']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peer-ms", type=float, default=None,
                        help="the peer's median at 10 messages on this machine, for ratios")
    args = parser.parse_args()
    with ExitStack() as stack:  # (migrating runs its own event loop: before ours)
        url = database(stack)
        model = fake_model(stack)
        asyncio.run(measure(args, jin_worker(stack, url, model), floor_worker(stack, url, model)))


if __name__ == "__main__":
    main()

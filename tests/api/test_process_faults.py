"""Faults done to real processes, each followed by the audit: a worker killed with SIGKILL in the
middle of a stream, and Postgres restarted under a worker that is serving steps.

(Provider faults and the helper down are in test_faults.py and test_compaction.py, with the
audit after each.)"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.database import migrate
from chat.audit import audit
from db.engine import create_engine
from llm.testing import FakeOpenAIServer, Reply
from memory.runtime_prompt import HELPER_SYSTEM
from tests.api.processes import JinProcess, OwnPostgres
from tests.api.sse_client import SSE, history, new_chat, parse_events, stream_step
from tests.backends import eventually

PROBLEM = "application/problem+json"
LEASE_TTL = 2.0


async def _assert_audit_clean(engine: AsyncEngine) -> None:
    result = await audit(engine)
    assert result.clean, result.findings()


@dataclass
class Seen:
    """What a client has read of a stream so far."""

    step_id: str = ""
    chunks: list[str] = field(default_factory=list)


async def _read_stream(client: httpx.AsyncClient, chat_id: str, content: str, seen: Seen) -> None:
    async with client.stream("POST", f"/v1/chats/{chat_id}/messages",
                             json={"content": content}, headers=SSE) as response:
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                name = line.partition(":")[2].strip()
            elif line.startswith("data:"):
                data = json.loads(line.partition(":")[2])
                if name == "step_start":
                    seen.step_id = data["step_id"]
                elif name == "message_chunk":
                    seen.chunks.append(data["chunk"])


async def _lease(engine: AsyncEngine, chat_id: str) -> tuple[str, bool]:
    """The chat's lease holder, and whether its lease has run out."""
    async with engine.connect() as conn:
        holder, expired = (await conn.execute(text(
            "SELECT lease_step_id, lease_expires_at < now() FROM chats WHERE id = :c"),
            {"c": uuid.UUID(chat_id)})).one()
    return str(holder), bool(expired)


async def test_a_worker_killed_mid_stream_leaves_its_partial_answer_and_the_chat_goes_on(
    workers: Callable[..., JinProcess], model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    fast = {"JIN_LEASE_TTL_SECONDS": str(LEASE_TTL), "JIN_PARTIAL_FLUSH_SECONDS": "0.2"}
    a, b = await asyncio.gather(asyncio.to_thread(workers, **fast),
                                asyncio.to_thread(workers, **fast))
    async with httpx.AsyncClient(base_url=a.url, timeout=30) as to_a, \
            httpx.AsyncClient(base_url=b.url, timeout=30) as to_b:
        chat_id = await new_chat(to_b)
        model.push(Reply([f"w{i} " for i in range(1000)], chunk_delay=0.02))  # 20 s of answer
        seen = Seen()
        reading = asyncio.create_task(_read_stream(to_a, chat_id, "talk to me", seen))
        # Mid-stream, with some of the answer flushed to Postgres: then the worker dies.
        for _ in range(200):
            rows = await history(to_b, chat_id)
            if len(rows) == 2 and rows[1]["content"]:
                break
            await asyncio.sleep(0.05)
        assert rows[1]["status"] == "streaming" and rows[1]["content"]
        await asyncio.to_thread(a.kill)
        killed_at = time.monotonic()
        with pytest.raises(httpx.HTTPError):  # the client sees the stream cut, not an end
            await asyncio.wait_for(reading, 10)
        assert 0 < len(seen.chunks) < 1000

        # What the dead worker last flushed: a prefix of what it streamed, never more.
        flushed = (await history(to_b, chat_id))[1]["content"]
        assert flushed and "".join(seen.chunks).startswith(flushed)

        # The lease still names the dead step, and runs out within the TTL of the kill.
        holder, expired = await _lease(engine, chat_id)
        assert holder == seen.step_id
        while not expired:
            assert time.monotonic() - killed_at < LEASE_TTL + 2.0, "the lease did not run out"
            await asyncio.sleep(0.05)
            _, expired = await _lease(engine, chat_id)

        # The other worker takes the next step; its prompt shows the partial answer.
        model.push(Reply(["I am back."]))
        events = await stream_step(to_b, chat_id, "still there?")
        assert dict(events)["message_end"]["status"] == "complete"
        assert {"role": "assistant", "content": flushed} in model.requests[-1]["messages"]
        rows = await history(to_b, chat_id)
        assert [(r["kind"], r["status"], r["content"]) for r in rows] == [
            ("user", "complete", "talk to me"),
            ("assistant", "interrupted", flushed),
            ("user", "complete", "still there?"),
            ("assistant", "complete", "I am back."),
        ]
        async with engine.connect() as conn:
            dead = (await conn.execute(text(
                "SELECT status, error_code FROM steps WHERE id = :s"),
                {"s": uuid.UUID(seen.step_id)})).one()
        assert tuple(dead) == ("interrupted", "worker_lost")
    await _assert_audit_clean(engine)


# --- Postgres restarted under load -------------------------------------------------------------

CLIENTS = 4
OUTAGE = 2.0  # seconds down: longer than the lease, so answers in flight cannot all be saved
REQUEST_BOUND = 10.0  # no request may take longer than this, outage or not
RECOVERY = 5.0  # after Postgres is back, each client has an answer within this
UNAVAILABLE = f"problem:503:database_unavailable:{PROBLEM}"


@dataclass(frozen=True)
class Outcome:
    started: float
    ended: float
    kind: str  # "complete", "problem:<status>:<code>:<type>", "stream_error:<code>", a failure


async def _one_step(client: httpx.AsyncClient, chat_id: str, content: str) -> str:
    async with client.stream("POST", f"/v1/chats/{chat_id}/messages",
                             json={"content": content}, headers=SSE) as response:
        body = (await response.aread()).decode()
        if response.status_code != 200:
            return _problem(response)
    events = parse_events(body)
    errors = [d["code"] for n, d in events if n == "message_error"]
    if errors:
        return f"stream_error:{errors[0]}"
    ends = [d["status"] for n, d in events if n == "step_end"]
    return "complete" if ends == ["complete"] else f"unfinished_stream:{[n for n, _ in events]}"


async def _one_read(client: httpx.AsyncClient, chat_id: str) -> str:
    response = await client.get(f"/v1/chats/{chat_id}/messages")
    return "complete" if response.status_code == 200 else _problem(response)


def _problem(response: httpx.Response) -> str:
    kind = response.headers.get("content-type", "")
    code = response.json().get("code") if kind == PROBLEM else response.text[:200]
    return f"problem:{response.status_code}:{code}:{kind}"


async def _drive(
    request: Callable[[int], Awaitable[str]], stop: asyncio.Event, outcomes: list[Outcome]
) -> None:
    """Requests one after another until told to stop; a failure is recorded, then the client
    waits a moment, as a real one would."""
    for i in range(100_000):
        if stop.is_set():
            return
        started = time.monotonic()
        try:
            kind = await asyncio.wait_for(request(i), REQUEST_BOUND)
        except TimeoutError:
            kind = "hang"
        except httpx.HTTPError as exc:
            kind = f"transport:{type(exc).__name__}"
        outcomes.append(Outcome(started, time.monotonic(), kind))
        await asyncio.sleep(0.1 if kind != "complete" else 0.02)


@pytest.fixture
def own_postgres(tmp_path: Path) -> Iterator[OwnPostgres]:
    server = OwnPostgres(tmp_path / "pg")
    yield server
    server.cleanup()


@pytest.fixture
def echo_model() -> Iterator[str]:
    """A fake that answers every step: an echo in a few chunks, so that steps are mid-stream
    when the database goes."""
    server = FakeOpenAIServer(strict=False, echo_chunks=4, echo_chunk_delay=0.05)
    url = server.start()
    yield url
    server.stop()


async def test_postgres_restarted_under_load_fails_requests_cleanly_and_the_worker_recovers(
    own_postgres: OwnPostgres, echo_model: str, jin_processes: Callable[..., JinProcess],
) -> None:
    url = own_postgres.url()
    await asyncio.to_thread(migrate, url)
    worker = await asyncio.to_thread(jin_processes, **{
        "DATABASE_URL": url,
        "JIN_BRAIN_URL": echo_model, "JIN_HELPER_URL": echo_model,
        "JIN_EMBEDDER_URL": echo_model, "JIN_EMBEDDER_MODEL": "fake-embedder",
        "JIN_LEASE_TTL_SECONDS": str(LEASE_TTL), "JIN_PARTIAL_FLUSH_SECONDS": "0.1",
        "JIN_ABORT_POLL_SECONDS": "0.1", "JIN_DB_POOL_SIZE": "4",
        # A batch the indexer had claimed when the database went away is embedded again once
        # its claim runs out (60 s by default): short here, so the test sees it come back.
        "JIN_INDEXER_CLAIM_SECONDS": "2",
    })
    engine = create_engine(url, pool_size=2)
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=worker.url, timeout=REQUEST_BOUND) as client:
        chats = [await new_chat(client) for _ in range(CLIENTS)]
        steps = [list[Outcome]() for _ in chats]
        reads: list[Outcome] = []
        drivers = [
            asyncio.create_task(_drive(
                lambda i, chat=chat: _one_step(client, chat, f"question {i}"), stop, mine))
            for chat, mine in zip(chats, steps, strict=True)
        ]
        drivers.append(asyncio.create_task(
            _drive(lambda _: _one_read(client, chats[0]), stop, reads)))
        await asyncio.sleep(1.5)  # under load
        down_at = time.monotonic()
        await asyncio.to_thread(own_postgres.stop)
        await asyncio.sleep(OUTAGE)
        await asyncio.to_thread(own_postgres.start)
        back_at = time.monotonic()
        await asyncio.sleep(RECOVERY + 1)
        stop.set()
        await asyncio.gather(*drivers)

        report = "\n".join(
            f"{name}: " + ", ".join(f"{o.started - down_at:+.2f}s {o.kind}" for o in mine)
            for name, mine in [*((f"steps {n}", m) for n, m in enumerate(steps)),
                               ("reads", reads)]
        )
        everything = [o for mine in [*steps, reads] for o in mine]
        # Every request was answered within the bound: a step, a 503 problem, or a stream that
        # ended with a code because its answer could not be saved. No 500, no cut connection.
        assert {o.kind for o in everything} <= {
            "complete", UNAVAILABLE, "stream_error:answer_not_saved"}, report
        assert any(o.kind == UNAVAILABLE for o in everything), "no request met the outage"
        for mine in [*steps, reads]:  # the same worker answers again soon after Postgres is back
            first = min(o.ended for o in mine if o.kind == "complete" and o.started >= back_at)
            assert first - back_at < RECOVERY, report
        assert worker.proc.poll() is None

        # Its background work came back too: the channels' connection (aborts, sockets' chats)
        # is back, and the indexer drains what the steps queued.
        listening = ("SELECT count(*) FROM pg_stat_activity "
                     "WHERE application_name = 'jin-channels'")
        await eventually(engine, listening, 1, within=5)
        await eventually(engine, "SELECT count(*) FROM recall_queue", 0, within=10)

        # A step that could not be saved while Postgres was down is closed by the chat's next.
        for chat in chats:
            assert await _one_step(client, chat, "one more") == "complete"
            assert "streaming" not in {r["status"] for r in await history(client, chat)}
    try:
        await _assert_audit_clean(engine)
    finally:
        await engine.dispose()


async def test_memory_work_the_outage_cut_short_does_not_hold_the_chat_after_it(
    own_postgres: OwnPostgres, echo_model: str, jin_processes: Callable[..., JinProcess],
) -> None:
    """The chat's L1 update is waiting on the helper when Postgres stops, and cannot write or
    give its claim back. Once Postgres is back the claim is given back, so the chat's next step
    updates its memory at once, rather than after the claim's two minutes."""
    url = own_postgres.url()
    await asyncio.to_thread(migrate, url)
    asked = threading.Event()  # the helper has the first L1 update

    def the_first_update_slowly(messages: list[dict[str, object]]) -> Reply | None:
        if messages[0]["content"] == HELPER_SYSTEM and not asked.is_set():
            asked.set()
            return Reply("topic: the outage", delay=1.0)
        return None

    helper = FakeOpenAIServer(respond=the_first_update_slowly)
    helper_url = helper.start()
    engine = create_engine(url, pool_size=1)
    try:
        worker = await asyncio.to_thread(jin_processes, **{
            "DATABASE_URL": url, "JIN_BRAIN_URL": echo_model, "JIN_HELPER_URL": helper_url,
            "JIN_EMBEDDER_URL": echo_model, "JIN_EMBEDDER_MODEL": "fake-embedder",
        })
        async with httpx.AsyncClient(base_url=worker.url, timeout=REQUEST_BOUND) as client:
            chat = await new_chat(client)
            first = asyncio.create_task(stream_step(client, chat, "the first question"))
            assert await asyncio.to_thread(asked.wait, REQUEST_BOUND)
            await asyncio.to_thread(own_postgres.stop)  # while the helper is still answering
            await asyncio.sleep(1.5)
            await asyncio.to_thread(own_postgres.start)
            assert "runtime_memory_update" not in {name for name, _ in await first}

            await eventually(engine, "SELECT count(*) FROM runtime_memory_claims", 0, within=3)
            second = await stream_step(client, chat, "the second question")
            updates = [data for name, data in second if name == "runtime_memory_update"]
            assert updates, [name for name, _ in second]
            assert "the second question" in updates[0]["memory"]
    finally:
        helper.stop()
        await engine.dispose()

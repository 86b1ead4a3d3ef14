"""`jin import`'s writing phase on a real Postgres: each format becomes the user's chats with their
own times, bad lines are named, a second import writes nothing, a stopped one goes on."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.history_import import ImportReport, index_queue, write_file
from chat.store import PostgresChatStore
from llm.onnx_embedder import OnnxMiniLM
from llm.tokens import TiktokenCounter
from memory.indexer import Indexer, IndexerConfig

T0 = 1_717_200_000  # 2024-06-01 00:00:00 UTC


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def jin_file() -> str:
    def turn(conv: str, session: str, turn_id: str, role: str, content: str, at: int) -> str:
        return json.dumps({"type": "turn", "conversation_id": conv, "session_id": session,
                           "turn_id": turn_id, "role": role, "content": content,
                           "created_at": _at(at).isoformat()})

    return "\n".join([
        turn("c1", "s1", "t1", "user", "My locker code is LCK-4242", T0),
        turn("c1", "s1", "t2", "assistant", "Noted, LCK-4242.", T0 + 60),
        '{"type": "turn", "conversation_id": "c1"',  # line 3: cut short
        turn("c1", "s2", "t3", "user", "The plumber comes on Friday", T0 + 86400),
        json.dumps({"type": "question", "question_id": "q1", "conversation_id": "c1",
                    "question": "locker?", "asked_at": _at(T0).isoformat(), "evidence": ["t1"]}),
        turn("c1", "s2", "t4", "robot", "beep", T0 + 86460),  # line 6: no such role
        turn("c1", "s2", "t5", "assistant", "I will remember Friday.", T0 + 86500),
    ]) + "\n"


def _node(node_id: str, parent: str | None, children: list[str], role: str | None,
          content: str, at: float | None) -> dict[str, Any]:
    message = None if role is None else {
        "id": node_id, "author": {"role": role}, "create_time": at,
        "content": {"content_type": "text", "parts": [content]}}
    return {"id": node_id, "message": message, "parent": parent, "children": children}


def chatgpt_file(extra_turn: bool = False) -> str:
    mapping = {
        "root": _node("root", None, ["sys"], None, "", None),
        "sys": _node("sys", "root", ["u1"], "system", "", None),
        "u1": _node("u1", "sys", ["a1", "a1-old"], "user", "Plan a trip to Lisbon", T0 + 10),
        # An answer that was regenerated: the branch not on the current path is left out.
        "a1-old": _node("a1-old", "u1", [], "assistant", "An answer not kept", T0 + 20),
        "a1": _node("a1", "u1", [], "assistant", "Day one: Alfama and the castle", T0 + 30),
    }
    current = "a1"
    if extra_turn:
        mapping["a1"]["children"] = ["u2"]
        mapping["u2"] = _node("u2", "a1", [], "user", "And day two?", T0 + 90)
        current = "u2"
    conversations = [
        {"id": "conv-1", "title": "Lisbon", "create_time": T0, "mapping": mapping,
         "current_node": current},
        {"id": "conv-2", "title": "Broken", "create_time": T0, "mapping": "not a tree"},
        {"id": "conv-3", "title": "Bread", "create_time": T0 + 500, "current_node": "u",
         "mapping": {"u": _node("u", None, [], "user", "How long to proof sourdough?",
                                T0 + 500)}},
    ]
    # One conversation a line or more, as an export is laid out: line numbers are asked for.
    return "[\n" + ",\n".join(json.dumps(c, indent=1) for c in conversations) + "\n]\n"


def openai_file() -> str:
    return "\n".join([
        json.dumps({"id": "o1", "title": "Tea", "created_at": T0 + 1000, "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Green tea steeping time?", "created_at": T0 + 1001},
            {"role": "assistant", "content": [{"type": "text", "text": "Two minutes."}]},
        ]}),
        "not json at all",
        json.dumps([{"role": "user", "content": "My cat is called Miso"},
                    {"role": "assistant", "content": None, "tool_calls": []},
                    {"role": "assistant", "content": "Hello Miso!"}]),
        json.dumps({"messages": "nope"}),
    ]) + "\n"


async def _import(engine: AsyncEngine, content: str, **kw: Any) -> ImportReport:
    return await write_file(PostgresChatStore(engine), TiktokenCounter(), "default", "ana",
                            content, "history", None, io.StringIO(), **kw)


async def _rows(engine: AsyncEngine) -> list[Any]:
    async with engine.connect() as conn:
        return list((await conn.execute(text(
            "SELECT c.title, c.created_at AS chat_at, c.user_id, m.kind, m.content, "
            "m.created_at, m.position FROM chats c JOIN messages m ON m.chat_id = c.id "
            "ORDER BY c.created_at, c.title, m.position"))).all())


async def _queued(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(text(
            "SELECT count(*) FROM recall_queue WHERE priority = 1"))).scalar_one())


async def test_jin_jsonl_becomes_a_chat_per_session_with_its_times_and_names_bad_lines(
    engine: AsyncEngine,
) -> None:
    report = await _import(engine, jin_file())
    assert report.format == "jin"
    assert [line.split(":")[0] for line in report.bad_lines] == ["line 3", "line 6"]
    assert "role" in report.bad_lines[1]
    rows = await _rows(engine)
    assert [(r.title, r.kind, r.content, r.created_at) for r in rows] == [
        ("s1", "user", "My locker code is LCK-4242", _at(T0)),
        ("s1", "assistant", "Noted, LCK-4242.", _at(T0 + 60)),
        ("s2", "user", "The plumber comes on Friday", _at(T0 + 86400)),
        ("s2", "assistant", "I will remember Friday.", _at(T0 + 86500)),
    ]
    assert {r.user_id for r in rows} == {"ana"}
    assert rows[0].chat_at == _at(T0) and rows[2].chat_at == _at(T0 + 86400)
    assert (report.chats_created, report.messages_written) == (2, 4)
    assert await _queued(engine) == 4  # every message waits for the indexer, as backfill


async def test_a_chatgpt_export_keeps_the_branch_shown_last_and_names_the_broken_one(
    engine: AsyncEngine,
) -> None:
    report = await _import(engine, chatgpt_file())
    assert report.format == "chatgpt"
    content = chatgpt_file()
    broken_line = content.splitlines().index(next(
        line for line in content.splitlines() if '"Broken"' in line)) + 1
    [bad] = report.bad_lines
    # Reported at the line its conversation starts on (the object's opening brace).
    assert bad.startswith("line ") and "mapping" in bad
    assert int(bad.split(":")[0].removeprefix("line ")) <= broken_line
    rows = await _rows(engine)
    assert [(r.title, r.kind, r.content, r.created_at) for r in rows] == [
        ("Lisbon", "user", "Plan a trip to Lisbon", _at(T0 + 10)),
        ("Lisbon", "assistant", "Day one: Alfama and the castle", _at(T0 + 30)),
        ("Bread", "user", "How long to proof sourdough?", _at(T0 + 500)),
    ]


async def test_an_openai_messages_file_imports_a_conversation_a_line(
    engine: AsyncEngine,
) -> None:
    report = await _import(engine, openai_file())
    assert report.format == "openai"
    assert [b.split(":")[0] for b in report.bad_lines] == ["line 2", "line 4"]
    rows = await _rows(engine)
    tea = [r for r in rows if r.title == "Tea"]
    assert [(r.kind, r.content, r.created_at) for r in tea] == [
        ("system", "Be brief.", _at(T0 + 1000)),
        ("user", "Green tea steeping time?", _at(T0 + 1001)),
        ("assistant", "Two minutes.", _at(T0 + 1000)),
    ]
    miso = [r for r in rows if r.title != "Tea"]
    assert [r.content for r in miso] == ["My cat is called Miso", "Hello Miso!"]
    assert miso[0].title == "My cat is called Miso"  # no title: its first user line
    assert await _queued(engine) == 4  # the system line is not recalled


@pytest.mark.parametrize("make", [jin_file, chatgpt_file, openai_file],
                         ids=["jin", "chatgpt", "openai"])
async def test_importing_the_same_file_twice_writes_nothing_new(
    engine: AsyncEngine, make: Any,
) -> None:
    first = await _import(engine, make())
    before = await _rows(engine)
    second = await _import(engine, make())
    assert await _rows(engine) == before
    assert (second.chats_created, second.messages_written) == (0, 0)
    assert second.messages_already_there == first.messages_written > 0


async def test_a_conversation_that_grew_since_gets_only_its_new_messages(
    engine: AsyncEngine,
) -> None:
    await _import(engine, chatgpt_file())
    again = await _import(engine, chatgpt_file(extra_turn=True))
    assert (again.chats_created, again.messages_written) == (0, 1)
    lisbon = [r for r in await _rows(engine) if r.title == "Lisbon"]
    assert [r.content for r in lisbon][-1] == "And day two?"
    assert lisbon[-1].position > lisbon[-2].position


class Interrupt:
    """Ctrl-C once `after` conversations are written (a progress bar is told of each)."""

    def __init__(self, after: int) -> None:
        self.after, self.done = after, 0

    def advance(self, n: int) -> None:
        self.done += n
        if self.done >= self.after:
            raise KeyboardInterrupt

    def close(self) -> None:
        pass


async def test_an_interrupted_import_goes_on_where_it_stopped(engine: AsyncEngine) -> None:
    lines = [json.dumps({"id": f"conv-{i}", "messages": [
        {"role": "user", "content": f"question {i}", "created_at": T0 + i},
        {"role": "assistant", "content": f"answer {i}", "created_at": T0 + i + 1}]})
        for i in range(6)]
    content = "\n".join(lines) + "\n"
    with pytest.raises(KeyboardInterrupt):
        await _import(engine, content, progress=Interrupt(after=2))
    assert len(await _rows(engine)) == 4
    resumed = await _import(engine, content)
    assert (resumed.chats_created, resumed.messages_written) == (4, 8)
    assert resumed.messages_already_there == 4
    rows = await _rows(engine)
    assert sorted(r.content for r in rows) == sorted(
        f"{kind} {i}" for i in range(6) for kind in ("question", "answer"))
    assert await _queued(engine) == 12


async def test_a_serving_indexer_leaves_imported_history_until_its_steps_are_quiet(
    engine: AsyncEngine, minilm: OnnxMiniLM,
) -> None:
    await _import(engine, openai_file())  # 4 messages queued as backfill
    async with engine.connect() as conn:
        live = (await conn.execute(text(
            "SELECT id FROM messages WHERE content = 'Hello Miso!'"))).scalar_one()
        await conn.execute(text("UPDATE recall_queue SET priority = 0 WHERE message_id = :m"),
                           {"m": live})
        await conn.commit()
    await minilm.embed(["loaded"])
    indexer = Indexer(engine, minilm, "minilm", IndexerConfig(backfill_after_quiet=0.5))
    indexer.step_seen()  # steps run on this worker
    running = asyncio.create_task(indexer.run())
    try:
        for _ in range(100):  # steps keep coming: the live message is indexed, no backfill
            indexer.step_seen()
            if await indexer.pending() == 3:
                break
            await asyncio.sleep(0.05)
        for _ in range(10):
            indexer.step_seen()
            await asyncio.sleep(0.05)
        assert await indexer.pending() == 3
        for _ in range(200):  # quiet since: the backfill goes too
            if not await indexer.pending():
                break
            await asyncio.sleep(0.05)
        assert await indexer.pending() == 0
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_backfill_indexes_every_queued_message_once_batch_after_batch(
    engine: AsyncEngine, minilm: OnnxMiniLM,
) -> None:
    await _import(engine, jin_file())
    await _import(engine, openai_file())  # 8 messages queued
    shown: list[int] = []
    indexer = Indexer(engine, minilm, "minilm", IndexerConfig(batch_size=3))
    assert await indexer.backfill(shown.append) == 8
    assert shown == [3, 3, 2] and await indexer.pending() == 0
    async with engine.connect() as conn:
        vectors = (await conn.execute(text(
            "SELECT count(*) FROM message_embeddings WHERE embedder = 'minilm' "
            "AND embedding IS NOT NULL"))).scalar_one()
    assert vectors == 8


async def test_an_import_stopped_while_it_indexes_goes_on_at_once_each_message_indexed_once(
    engine: AsyncEngine, minilm: OnnxMiniLM,
) -> None:
    await _import(engine, jin_file())
    await _import(engine, openai_file())  # 8 messages queued
    indexer = Indexer(engine, minilm, "minilm", IndexerConfig(batch_size=3))

    def stop(_: int) -> None:  # Ctrl-C once the first batch is shown: the next is embedded
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await indexer.backfill(stop)
    # The run after it finds nothing left claimed by the stopped one: it does not wait for the
    # claim to expire (60 s), and tells of no wait.
    out = io.StringIO()
    indexed, _ = await asyncio.wait_for(index_queue(indexer, out), timeout=20)
    assert (indexed, await indexer.pending()) == (5, 0)
    assert "waiting" not in out.getvalue()
    async with engine.connect() as conn:
        vectors = (await conn.execute(text(
            "SELECT count(*) FROM message_embeddings WHERE embedder = 'minilm' "
            "AND embedding IS NOT NULL"))).scalar_one()
    assert vectors == 8

"""The cheap pre-pass, rule by rule, on rows outside the protected tail."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from chat.types import Message
from llm.tokens import TiktokenCounter
from orchestrator.prepass import MAX_ARGS_CHARS, prepass

NOW = datetime(2026, 1, 1, tzinfo=UTC)
COUNTER = TiktokenCounter()


def row(kind: str, content: str = "", **meta: Any) -> Message:
    return Message(
        id=uuid.uuid4(), chat_id=uuid.uuid4(), position=0, kind=kind,  # type: ignore[arg-type]
        content=content, status="complete", token_count=COUNTER.count(content),
        created_at=NOW, meta=meta,
    )


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


LOG = "\n".join(f"line {i}: compiled module_{i}.py ok" for i in range(300))


def test_old_tool_results_become_one_line_digests_and_the_tail_stays_verbatim() -> None:
    rows = [
        row("user", "build it"),
        row("assistant", "", tool_calls=[call("c1", "shell", '{"cmd": "make"}')]),
        row("tool", LOG, tool_call_id="c1"),
        row("assistant", "", tool_calls=[call("c2", "shell", '{"cmd": "make test"}')]),
        row("tool", LOG + "\nall tests passed", tool_call_id="c2"),
    ]
    out = prepass(rows, protected=2, counter=COUNTER)
    digest = out[2].content
    assert digest.startswith('[tool] shell({"cmd": "make"}) -> line 0: compiled module_0.py ok')
    assert digest.endswith(", 300 lines") and "\n" not in digest
    assert out[2].token_count < rows[2].token_count / 50
    assert out[3:] == rows[3:]  # protected: untouched, same objects


def test_identical_tool_results_keep_the_newest_and_point_older_ones_to_it() -> None:
    rows = [
        row("assistant", "", tool_calls=[call("a", "read", '{"path": "x"}')]),
        row("tool", "contents of x", tool_call_id="a"),
        row("assistant", "", tool_calls=[call("b", "read", '{"path": "x"}')]),
        row("tool", "contents of x", tool_call_id="b"),
    ]
    out = prepass(rows, protected=2, counter=COUNTER)
    assert out[1].content == "[tool] same result as the later call b"
    assert out[3].content == "contents of x"


def test_old_images_are_dropped_with_a_note() -> None:
    rows = [row("user", "look", images=["data:a", "data:b"]), row("user", "and this", images=["c"])]
    out = prepass(rows, protected=1, counter=COUNTER)
    assert "images" not in out[0].meta and out[0].content == "look\n[2 images omitted]"
    assert out[1].meta["images"] == ["c"]


def test_huge_tool_arguments_are_shortened_and_stay_valid_json() -> None:
    big = json.dumps({"path": "a.txt", "content": "x" * 50_000, "lines": list(range(1000))})
    rows = [row("assistant", "", tool_calls=[call("w", "write", big)]), row("user", "next")]
    out = prepass(rows, protected=1, counter=COUNTER)
    args = out[0].meta["tool_calls"][0]["function"]["arguments"]
    parsed = json.loads(args)  # still valid JSON
    assert parsed["path"] == "a.txt"
    assert len(args) < MAX_ARGS_CHARS and "+49800 chars" in parsed["content"]
    assert parsed["lines"][-1] == "…[+980 items]"
    broken = row("assistant", "", tool_calls=[call("v", "write", "{not json" + "y" * 5000)])
    out = prepass([broken, row("user", "x")], protected=1, counter=COUNTER)
    assert isinstance(json.loads(out[0].meta["tool_calls"][0]["function"]["arguments"]), str)


def test_prepass_is_deterministic_and_idempotent() -> None:
    rows = [
        row("assistant", "", tool_calls=[call("c1", "shell", '{"cmd": "ls"}')]),
        row("tool", LOG, tool_call_id="c1"),
        row("user", "thanks"),
    ]
    once = prepass(rows, protected=1, counter=COUNTER)
    assert prepass(rows, protected=1, counter=COUNTER) == once
    assert prepass(once, protected=1, counter=COUNTER) == once


def test_tool_heavy_transcript_saves_most_tokens() -> None:
    rows = []
    for i in range(40):
        rows.append(row("assistant", "", tool_calls=[call(f"c{i}", "shell", '{"cmd": "make"}')]))
        rows.append(row("tool", LOG if i % 2 else LOG + f"\nrun {i}", tool_call_id=f"c{i}"))
    before = sum(r.token_count for r in rows)
    after = sum(r.token_count for r in prepass(rows, protected=4, counter=COUNTER))
    assert after < before * 0.1

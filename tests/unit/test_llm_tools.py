"""Tool calls in an OpenAI-compatible stream: fragments across chunks become whole calls."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llm.errors import MalformedStream
from llm.sse import ThinkSplitter, ToolCallAssembler, chunk_deltas
from llm.types import ContentDelta, Delta, Finish, ToolCall, ToolCalls


def _payload(delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _fragment(index: int, arguments: str, *, call_id: str = "", name: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        out |= {"id": call_id, "type": "function"}
        out["function"]["name"] = name
    return out


def _play(payloads: list[str]) -> list[Delta]:
    splitter, calls = ThinkSplitter(), ToolCallAssembler()
    return [d for p in payloads for d in chunk_deltas(p, splitter, calls)]


def test_fragments_across_chunks_become_one_call_before_the_finish() -> None:
    deltas = _play([
        _payload({"role": "assistant", "content": None}),
        _payload({"tool_calls": [_fragment(0, '{"ci', call_id="call_1", name="get_weather")]}),
        _payload({"tool_calls": [_fragment(0, 'ty": "Ky')]}),
        _payload({"tool_calls": [_fragment(0, 'iv"}')]}),
        _payload({}, "tool_calls"),
    ])
    assert deltas == [
        ToolCalls([ToolCall("call_1", "get_weather", '{"city": "Kyiv"}')]),
        Finish("tool_calls"),
    ]


def test_parallel_calls_keep_index_order_however_they_interleave() -> None:
    deltas = _play([
        _payload({"tool_calls": [_fragment(1, '{"q":', call_id="b", name="search")]}),
        _payload({"tool_calls": [_fragment(0, "{", call_id="a", name="clock")]}),
        _payload({"tool_calls": [_fragment(1, ' "tea"}'), _fragment(0, "}")]}),
        _payload({}, "tool_calls"),
    ])
    assert deltas[0] == ToolCalls([
        ToolCall("a", "clock", "{}"), ToolCall("b", "search", '{"q": "tea"}')])
    assert [c.to_openai() for c in deltas[0].calls][1] == {
        "id": "b", "type": "function", "function": {"name": "search", "arguments": '{"q": "tea"}'}}


def test_content_then_tool_calls_in_one_stream() -> None:
    deltas = _play([
        _payload({"content": "<think>need the weather</think>Let me "}),
        _payload({"content": "check."}),
        _payload({"tool_calls": [_fragment(0, '{"city": "Lviv"}', call_id="c", name="weather")]}),
        _payload({}, "tool_calls"),
    ])
    assert [d.type for d in deltas] == ["reasoning", "content", "content", "tool_calls", "finish"]
    assert "".join(d.text for d in deltas if isinstance(d, ContentDelta)) == "Let me check."
    assert deltas[3] == ToolCalls([ToolCall("c", "weather", '{"city": "Lviv"}')])


def test_calls_are_emitted_whatever_the_finish_reason() -> None:
    deltas = _play([
        _payload({"tool_calls": [_fragment(0, "{}", call_id="x", name="ping")]}),
        _payload({}, "stop"),
    ])
    assert deltas == [ToolCalls([ToolCall("x", "ping", "{}")]), Finish("stop")]


def test_a_stream_without_tool_calls_yields_no_tool_calls_delta() -> None:
    assert _play([_payload({"content": "hi"}), _payload({}, "stop")]) == [
        ContentDelta("hi"), Finish("stop")]


def test_fragments_without_an_index_follow_the_call_ids() -> None:
    def bare(arguments: str, **call: str) -> dict[str, Any]:
        fragment = _fragment(0, arguments, **call)
        del fragment["index"]
        return fragment

    deltas = _play([
        _payload({"tool_calls": [bare('{"a"', call_id="1", name="f")]}),
        _payload({"tool_calls": [bare(": 1}")]}),
        _payload({"tool_calls": [bare("{}", call_id="2", name="g")]}),
        _payload({}, "tool_calls"),
    ])
    assert deltas[0] == ToolCalls([ToolCall("1", "f", '{"a": 1}'), ToolCall("2", "g", "{}")])


@pytest.mark.parametrize(
    "tool_calls",
    [
        "not a list",
        ["not an object"],
        [{"index": 0, "id": "a", "function": {"name": "f", "arguments": {"city": "Kyiv"}}}],
        [{"index": 0, "id": "a", "function": "f"}],
        [{"index": "0", "id": "a", "function": {"name": "f", "arguments": ""}}],
        [{"index": 0, "id": 7, "function": {"name": "f", "arguments": ""}}],
    ],
)
def test_malformed_fragments_raise(tool_calls: Any) -> None:
    with pytest.raises(MalformedStream):
        _play([_payload({"tool_calls": tool_calls})])


def test_a_call_that_never_gets_a_name_is_malformed() -> None:
    with pytest.raises(MalformedStream):
        _play([_payload({"tool_calls": [_fragment(0, "{}")]}), _payload({}, "tool_calls")])

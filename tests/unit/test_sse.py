"""Parsing an OpenAI-compatible stream: events, reasoning fields, <think> tags, bad bytes."""

from __future__ import annotations

import json

import pytest

from llm.errors import MalformedStream
from llm.sse import SSEDecoder, ThinkSplitter, chunk_deltas
from llm.types import ContentDelta, Finish, ReasoningDelta


def _split(chunks: list[str]) -> tuple[str, str]:
    splitter = ThinkSplitter()
    out = [d for c in chunks for d in splitter.feed(c)] + list(splitter.flush())
    content = "".join(d.text for d in out if isinstance(d, ContentDelta))
    reasoning = "".join(d.text for d in out if isinstance(d, ReasoningDelta))
    return content, reasoning


@pytest.mark.parametrize(
    "chunks",
    [
        ["<think>plan</think>answer"],
        ["<", "think", ">pl", "an</", "think>", "ans", "wer"],
        ["<think>p", "lan</thi", "nk>answer"],
        list("<think>plan</think>answer"),
    ],
)
def test_think_tags_are_split_out_across_chunk_boundaries(chunks: list[str]) -> None:
    assert _split(chunks) == ("answer", "plan")


def test_text_that_only_looks_like_a_tag_stays_content() -> None:
    assert _split(["a <thin", "g> and x < y"]) == ("a <thing> and x < y", "")
    assert _split(["ends with <thi"]) == ("ends with <thi", "")


def test_decoder_joins_data_lines_and_skips_comments() -> None:
    decoder = SSEDecoder()
    lines = [": keep-alive", "data: {\"a\":", "data: 1}", "", "event: x", "data: [DONE]", ""]
    assert [d for line in lines if (d := decoder.feed(line)) is not None] == [
        '{"a":\n1}', "[DONE]"]


def _payload(delta: dict, finish: str | None = None, usage: dict | None = None) -> str:
    body: dict = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        body["usage"] = usage
    return json.dumps(body)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_fields_become_reasoning_deltas(field: str) -> None:
    deltas = list(chunk_deltas(_payload({field: "hmm", "content": "yes"}), ThinkSplitter()))
    assert deltas == [ReasoningDelta("hmm"), ContentDelta("yes")]


def test_finish_carries_reason_and_usage() -> None:
    deltas = list(chunk_deltas(_payload({}, "stop", {"total_tokens": 3}), ThinkSplitter()))
    assert deltas == [Finish("stop", {"total_tokens": 3})]


def test_a_chunk_with_what_orjson_refuses_and_python_takes_is_still_read() -> None:
    # Infinity and NaN are not JSON, but a server written in Python may send them.
    usage = {"cost": float("inf")}
    assert list(chunk_deltas(_payload({}, "stop", usage), ThinkSplitter())) == [
        Finish("stop", usage)]


@pytest.mark.parametrize("payload", ["{nope", "[1, 2]", '{"id": 1}', '{"choices": [{"delta": 3}]}'])
def test_malformed_payloads_raise(payload: str) -> None:
    with pytest.raises(MalformedStream):
        list(chunk_deltas(payload, ThinkSplitter()))


def test_context_window_is_read_from_models_where_the_server_says() -> None:
    from llm.openai import context_window_of

    assert context_window_of([{"id": "m", "max_model_len": 32768}], "m") == 32768
    assert context_window_of([{"id": "x"}, {"id": "m", "context_length": 8000}], "m") == 8000
    assert context_window_of([{"id": "m", "meta": {"n_ctx_train": 4096}}], "m") == 4096
    assert context_window_of([{"id": "m", "object": "model"}], "m") is None


def test_the_echo_fake_answers_a_summary_request_with_a_well_formed_summary() -> None:
    from llm.testing import FakeOpenAIServer
    from orchestrator.compaction_policy import helper_prompt, parse_summary
    from tests.unit.test_compaction_policy import msg

    prompt = helper_prompt("", [msg("user", "the code is LCK-0042")])
    reply = FakeOpenAIServer()._next_reply({"messages": [m.to_openai() for m in prompt]})
    assert reply is not None
    summary = parse_summary("".join(reply.chunks()), "stop")  # accepted, not rejected
    assert "LCK-0042" in summary


def test_a_step_answer_with_an_integer_past_64_bits_is_still_written() -> None:
    import json

    from api.routes.messages import StepJSON

    content = {"usage": {"prompt_tokens": 2**70}, "text": "é"}
    assert json.loads(StepJSON(content).body) == content
    assert json.loads(StepJSON({"usage": {"prompt_tokens": 3}}).body) == {
        "usage": {"prompt_tokens": 3}}


def test_lines_come_whole_across_pieces_and_a_line_over_the_limit_is_malformed() -> None:
    from llm.sse import LineSplitter

    lines = LineSplitter(limit=8)
    got = [*lines.feed(b"data: a\r"), *lines.feed(b"\n\nda"), *lines.feed(b"ta: b"),
           *lines.flush()]
    assert got == [b"data: a\r", b"", b"data: b"]
    with pytest.raises(MalformedStream):
        LineSplitter(limit=8).feed(b"data: 123")  # no line end yet, and already too long
    with pytest.raises(MalformedStream):
        LineSplitter(limit=8).feed(b"data: 123\n")

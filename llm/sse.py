"""Bytes of an OpenAI-compatible stream -> deltas, with reasoning split from content. Pure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from llm.errors import LLMError, MalformedStream
from llm.types import ContentDelta, Delta, Finish, ReasoningDelta

DONE = "[DONE]"


class SSEDecoder:
    """Turns lines of a `text/event-stream` into the data payload of each event."""

    def __init__(self) -> None:
        self._data: list[str] = []

    def feed(self, line: str) -> str | None:
        """Feed one line (without its newline); returns an event's data when one is complete."""
        if line == "":
            if not self._data:
                return None
            data, self._data = "\n".join(self._data), []
            return data
        if line.startswith(":"):
            return None  # comment / keep-alive
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None

    def flush(self) -> str | None:
        return self.feed("")


class ThinkSplitter:
    """Splits `<think>...</think>` out of streamed content, across chunk boundaries."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self._inside = False
        self._pending = ""

    def feed(self, text: str) -> Iterator[Delta]:
        buf = self._pending + text
        self._pending = ""
        while buf:
            tag = self.CLOSE if self._inside else self.OPEN
            idx = buf.find(tag)
            if idx >= 0:
                yield from self._emit(buf[:idx])
                buf = buf[idx + len(tag) :]
                self._inside = not self._inside
                continue
            keep = _partial_suffix(buf, tag)
            yield from self._emit(buf[: len(buf) - keep])
            self._pending = buf[len(buf) - keep :]
            break

    def flush(self) -> Iterator[Delta]:
        pending, self._pending = self._pending, ""
        yield from self._emit(pending)

    def _emit(self, text: str) -> Iterator[Delta]:
        if text:
            yield ReasoningDelta(text) if self._inside else ContentDelta(text)


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of text that is a proper prefix of tag."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


def chunk_deltas(payload: str, splitter: ThinkSplitter) -> Iterator[Delta]:
    """Deltas of one `chat.completion.chunk` payload. Raises MalformedStream or LLMError."""
    try:
        obj: Any = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise MalformedStream(f"not JSON: {payload[:120]!r}") from exc
    if not isinstance(obj, dict):
        raise MalformedStream(f"not an object: {payload[:120]!r}")
    if "error" in obj:
        err = obj["error"]
        message = err.get("message") if isinstance(err, dict) else str(err)
        raise LLMError(f"provider sent an error in the stream: {message}")
    choices = obj.get("choices")
    if not isinstance(choices, list):
        raise MalformedStream(f"no choices: {payload[:120]!r}")
    usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
    for choice in choices[:1]:
        if not isinstance(choice, dict):
            raise MalformedStream(f"choice is not an object: {payload[:120]!r}")
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise MalformedStream(f"delta is not an object: {payload[:120]!r}")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            yield ReasoningDelta(reasoning)
        content = delta.get("content")
        if isinstance(content, str) and content:
            yield from splitter.feed(content)
        if choice.get("finish_reason"):
            yield from splitter.flush()
            yield Finish(choice["finish_reason"], usage or {})
            return
    if usage and not choices:
        yield Finish(None, usage)

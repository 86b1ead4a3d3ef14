"""OpenAI's chat completions wire format: the request jin takes, and the step's events as a
`chat.completion` or as `chat.completion.chunk` server-sent events. Pure."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from api.schemas import Text
from chat.types import ModelSettings
from orchestrator.events import (
    ClientToolCalls,
    MessageChunk,
    MessageEnd,
    MessageError,
    StepEvent,
    ThinkingChunk,
)


class TextPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: Text | None = None


class FunctionCall(BaseModel):
    name: Text
    arguments: Text


class ToolCallIn(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: Text
    type: Literal["function"] = "function"
    function: FunctionCall


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")  # (reasoning_content, refusal, audio: not stored)
    role: Literal["system", "developer", "user", "assistant", "tool"]
    # (Text: what is stored can hold no NUL, nor a lone surrogate: either is a bad request.)
    content: Text | list[TextPart] | None = None
    name: Text | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: Text | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatCompletionIn(BaseModel):
    """What jin reads of a request; other OpenAI parameters are accepted and not used (jin's
    brain and the chat's settings decide them). `temperature` and `max_tokens` (or
    `max_completion_tokens`) hold for this request's answer, over the chat's settings."""

    model_config = ConfigDict(extra="allow")
    model: Text = Field(description="echoed back; jin's configured brain answers")
    messages: list[MessageIn] = Field(min_length=1)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    user: Text | None = Field(None, min_length=1, max_length=200,
                             description="the memory's user, within the key's tenant")
    metadata: dict[str, Text] | None = Field(
        None, description="`chat_id` names the chat (as `X-Jin-Chat-Id` does)")
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    n: int | None = Field(None, ge=1, le=1, description="one choice only")
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, description="of this answer")
    max_completion_tokens: int | None = Field(None, ge=1, description="as `max_tokens`")

    def generation(self) -> ModelSettings | None:
        """This request's own temperature and answer length, or None to keep the chat's."""
        longest = self.max_completion_tokens or self.max_tokens
        if self.temperature is None and longest is None:
            return None
        return ModelSettings(temperature=self.temperature, max_answer_tokens=longest)


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelsOut(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


ERROR_SCHEMA: dict[str, Any] = {
    "title": "OpenAIError",
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["message", "type", "code"],
        "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                       "code": {"type": ["string", "null"]},
                       "param": {"type": ["string", "null"]}},
    }},
}

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 409: "conflict_error", 413: "invalid_request_error",
          422: "invalid_request_error", 429: "rate_limit_error"}


def error_body(status: int, code: str, message: str) -> dict[str, Any]:
    """OpenAI's error object; `code` is jin's stable problem code."""
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    usage = dict(usage or {})
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    usage.setdefault("prompt_tokens", prompt)
    usage.setdefault("completion_tokens", completion)
    usage.setdefault("total_tokens", (prompt or 0) + (completion or 0))
    return usage


@dataclass
class Completion:
    """A step's events folded into one `chat.completion`."""

    id: str
    model: str
    created: int = field(default_factory=lambda: int(time.time()))
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    error: MessageError | None = None

    def add(self, event: StepEvent) -> None:
        if isinstance(event, MessageChunk):
            self.content.append(event.chunk)
        elif isinstance(event, ThinkingChunk):
            self.reasoning.append(event.chunk)
        elif isinstance(event, ClientToolCalls):
            self.tool_calls.extend(event.calls)
        elif isinstance(event, MessageError):
            self.error = event
        elif isinstance(event, MessageEnd):
            self.usage = event.usage

    def json(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content)}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return {
            "id": self.id, "object": "chat.completion", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if self.tool_calls else "stop"}],
            "usage": _usage(self.usage),
        }


@dataclass
class Chunks:
    """A step's events as `chat.completion.chunk` events, ending in `data: [DONE]`."""

    id: str
    model: str
    include_usage: bool = False
    created: int = field(default_factory=lambda: int(time.time()))
    called: bool = False  # the answer ended in client tool calls

    def _frame(self, body: dict[str, Any]) -> bytes:
        return b"data: " + orjson.dumps(body) + b"\n\n"

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self._frame({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        })

    def first(self) -> bytes:
        return self.chunk({"role": "assistant", "content": ""})

    def encode(self, event: StepEvent) -> bytes | None:
        """The frames of one event (None: nothing a client of OpenAI's format reads)."""
        if isinstance(event, MessageChunk):
            return self.chunk({"content": event.chunk})
        if isinstance(event, ThinkingChunk):
            return self.chunk({"reasoning_content": event.chunk})
        if isinstance(event, ClientToolCalls):
            self.called = True
            return self.chunk({"tool_calls": [{"index": i, **call}
                                              for i, call in enumerate(event.calls)]})
        if isinstance(event, MessageError):
            return self._frame(error_body(502 if event.code.startswith("provider") else 500,
                                          event.code, event.text))
        if isinstance(event, MessageEnd):
            if event.status == "failed":
                return None  # (its error went just before)
            end = self.chunk({}, "tool_calls" if self.called else "stop")
            if self.include_usage:
                end += self._frame({
                    "id": self.id, "object": "chat.completion.chunk", "created": self.created,
                    "model": self.model, "choices": [], "usage": _usage(event.usage),
                })
            return end
        return None

    def done(self) -> bytes:
        return b"data: [DONE]\n\n"


def completion_id(step_id: uuid.UUID) -> str:
    return f"chatcmpl-{step_id.hex}"

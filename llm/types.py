"""Plain data that crosses the model port. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ProviderConfig:
    """Where a model role is served: the base URL as OpenAI clients take it (ending in /v1)."""

    role: str
    base_url: str
    model: str
    api_key: str | None = None
    context_window: int | None = None
    embedded: bool = False
    # The role's generation defaults: a request's own temperature wins (a chat's setting); its
    # max_tokens is capped at the role's.
    temperature: float | None = None
    max_tokens: int | None = None
    served_by: str | None = None  # another role whose server stands in (JIN_HELPER_AS_BRAIN)


@dataclass(frozen=True)
class HTTPConfig:
    """How a provider's HTTP client waits and pools. `read_timeout` bounds each wait for bytes
    (a server that hangs), `total_timeout` a whole call with its body (a server that trickles
    forever); at most `max_connections` open to one server, idle ones kept `keepalive` seconds."""

    connect_timeout: float
    read_timeout: float
    total_timeout: float | None = None
    max_connections: int = 64
    # Under the 5 s that uvicorn (and so many model servers) keeps an idle connection open.
    keepalive: float = 4.0


@dataclass(frozen=True)
class PromptMessage:
    role: Role
    content: str
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.name:
            out["name"] = self.name
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        return out


@dataclass(frozen=True)
class CompletionRequest:
    messages: list[PromptMessage]
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    tools: list[dict[str, Any]] | None = None  # OpenAI `tools`: [{"type": "function", ...}]
    tool_choice: str | dict[str, Any] | None = None  # OpenAI's; "auto" when tools are given


@dataclass(frozen=True)
class ContentDelta:
    text: str
    type: Literal["content"] = "content"


@dataclass(frozen=True)
class ReasoningDelta:
    text: str
    type: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True)
class Finish:
    reason: str | None
    usage: dict[str, Any] = field(default_factory=dict)
    type: Literal["finish"] = "finish"


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for. `arguments` is the JSON text exactly as the model
    wrote it: the model may write invalid JSON, and whoever runs the tool decides what to do."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        """The entry of an assistant message's `tool_calls`, to send the call back in history."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class ToolCalls:
    """The complete calls of one answer, in the model's order; comes just before the Finish."""

    calls: list[ToolCall]
    type: Literal["tool_calls"] = "tool_calls"


Delta = ContentDelta | ReasoningDelta | ToolCalls | Finish

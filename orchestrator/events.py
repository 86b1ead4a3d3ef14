"""What a step yields. The API encodes these with `event_payload`: one SSE event each
(`event:` = `type`), or one WebSocket message each (`event_message`, the type inside)."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class StepStart:
    step_id: uuid.UUID
    chat_id: uuid.UUID
    user_message_id: uuid.UUID
    type: Literal["step_start"] = "step_start"


@dataclass(frozen=True)
class ContextInfo:
    sections: list[dict[str, Any]]
    budget: int
    total_tokens: int
    recalled: list[dict[str, Any]] = field(default_factory=list)
    route: list[str] = field(default_factory=list)  # the planner's nodes, in order
    translation: dict[str, Any] | None = None  # what the brain read for the new message
    type: Literal["context"] = "context"


@dataclass(frozen=True)
class MessageStart:
    message_id: uuid.UUID
    role: str
    type: Literal["message_start"] = "message_start"


@dataclass(frozen=True)
class ThinkingChunk:
    message_id: uuid.UUID
    chunk: str
    type: Literal["thinking_chunk"] = "thinking_chunk"


@dataclass(frozen=True)
class MessageChunk:
    message_id: uuid.UUID
    chunk: str
    type: Literal["message_chunk"] = "message_chunk"


@dataclass(frozen=True)
class BrainChunk:
    """The brain's own answer as it streams, on a route that translates the answer
    (orchestrator/route.py `translator_answer`): the message's text is then its translation,
    streamed as message_chunk once the translator is done (or the brain's own words, if it
    failed), so that the message_chunks add up to the answer stored."""

    message_id: uuid.UUID
    chunk: str
    type: Literal["brain_chunk"] = "brain_chunk"


@dataclass(frozen=True)
class MessageEnd:
    message_id: uuid.UUID
    status: str
    usage: dict[str, Any] | None
    type: Literal["message_end"] = "message_end"


@dataclass(frozen=True)
class MessageError:
    message_id: uuid.UUID | None
    code: str
    text: str
    preview: str | None = None  # loop_detected: at most 160 characters of the looped text
    type: Literal["message_error"] = "message_error"


@dataclass(frozen=True)
class RuntimeAction:
    """An action the step ran for the model: a memory tool (what, on which fact, with what
    result), or a runtime action such as a web search, streamed as `started`, then `done` or
    `failed` (orchestrator/actions.py). A JSON object on any transport."""

    # remember / forget / web_search / save_session / the unknown name the model called
    action: str
    id: str | None  # the fact's id; a runtime action's own id within the answer (act_1, ...)
    text: str  # the fact; the search's query
    # Memory: added / updated / superseded / forgotten / not_found / invalid / failed.
    # Runtime actions: started / done / failed.
    status: str
    call_id: str  # the model's tool call id, or marker_N for a text marker
    replaced: str | None = None  # the fact a paraphrase superseded
    error: str | None = None
    # Runtime actions only: how the model asked (tool_call, marker), the result's status
    # (FOUND, NOT_FOUND, FAILED), its hits ({title, url, excerpt}) and why it failed (a code).
    via: str | None = None
    result: str | None = None
    hits: list[dict[str, str]] | None = None
    code: str | None = None
    snapshot_id: str | None = None  # save_session: the L3 snapshot it saved
    type: Literal["runtime_action"] = "runtime_action"


@dataclass(frozen=True)
class ClientToolCalls:
    """The answer ends in calls of the client's own tools (OpenAI's `tool_calls` entries): the
    client runs them and sends their results as the next step."""

    message_id: uuid.UUID
    calls: list[dict[str, Any]]
    type: Literal["tool_calls"] = "tool_calls"


@dataclass(frozen=True)
class CompactionDone:
    summary_id: uuid.UUID | None
    through: int | None  # position of the last message summarised
    tokens_before: int
    tokens_after: int
    reason: str
    skipped: bool = False
    fallback: bool = False  # written without the helper (down, backing off, or rejected)
    coverage: float | None = None
    helper_ms: float = 0.0  # the helper model's time on the summary
    type: Literal["compaction"] = "compaction"


@dataclass(frozen=True)
class StepWarning:
    """Something optional failed and the step went on without it (the translator: the user's
    own text went to the brain)."""

    code: str
    text: str
    type: Literal["warning"] = "warning"


@dataclass(frozen=True)
class RuntimeMemoryUpdate:
    """A new version of the chat's L1 runtime memory: its text, what changed against the state
    before the update (memory/runtime_state.py `diff`), and its number."""

    chat_id: uuid.UUID
    memory: str
    diff: dict[str, Any]
    version: int
    type: Literal["runtime_memory_update"] = "runtime_memory_update"


@dataclass(frozen=True)
class RuntimePatternsUpdate:
    """What an L2 pass after a turn found: a new version of the chat's patterns (each as
    memory/runtime_patterns.py `Pattern.to_json`), and the alerts it recorded (`stale_l1`: an
    L1 update that changed no line). `version` is the patterns' newest (0 before the first)."""

    chat_id: uuid.UUID
    patterns: list[dict[str, Any]]
    version: int
    alerts: list[dict[str, Any]] = field(default_factory=list)
    type: Literal["runtime_patterns_update"] = "runtime_patterns_update"


@dataclass(frozen=True)
class RuntimeLog:
    """A line of the runtime's log for whoever watches the step (JIN's `log`): what the runtime
    decided, under a tag naming the part that decided it (`[PLANNER]`, `[RECALL]`)."""

    tag: str
    message: str
    type: Literal["log"] = "log"


@dataclass(frozen=True)
class Telemetry:
    """Each node of the step's route, with its time and the tokens its server counted, and the
    step's own time: step_end's timings, per node, for a watcher to draw."""

    nodes: list[dict[str, Any]]
    total_ms: float
    overhead_ms: float
    type: Literal["telemetry"] = "telemetry"


@dataclass(frozen=True)
class StepEnd:
    step_id: uuid.UUID
    status: str
    timings: dict[str, float] = field(default_factory=dict)
    type: Literal["step_end"] = "step_end"


StepEvent = (
    StepStart | ContextInfo | MessageStart | ThinkingChunk | MessageChunk | BrainChunk
    | MessageEnd
    | MessageError | RuntimeAction | ClientToolCalls | CompactionDone | StepWarning
    | RuntimeMemoryUpdate | RuntimePatternsUpdate | StepEnd | RuntimeLog | Telemetry
)


def event_payload(event: StepEvent) -> dict[str, Any]:
    """The JSON body of an event (without its type, which is the SSE event name)."""
    data = {f.name: getattr(event, f.name) for f in dataclasses.fields(event) if f.name != "type"}
    return {k: str(v) if isinstance(v, uuid.UUID) else v for k, v in data.items()}


def event_message(event: StepEvent) -> dict[str, Any]:
    """The event as one JSON object with its `type` (a WebSocket message)."""
    return {"type": event.type, **event_payload(event)}

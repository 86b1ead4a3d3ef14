"""Step events -> SSE frames, and the finished step as one JSON object."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from chat.ports import StepOutcome
from orchestrator.events import (
    ContextInfo,
    MessageChunk,
    MessageEnd,
    MessageError,
    MessageStart,
    RuntimeAction,
    RuntimeMemoryUpdate,
    RuntimePatternsUpdate,
    StepEnd,
    StepEvent,
    StepStart,
    StepWarning,
    ThinkingChunk,
    event_payload,
)


def frame(event: StepEvent) -> bytes:
    data = json.dumps(event_payload(event), ensure_ascii=False, separators=(",", ":"))
    return f"event: {event.type}\ndata: {data}\n\n".encode()


def replay_events(outcome: StepOutcome) -> list[StepEvent]:
    """The events of a step that already ran (an idempotent retry), from what was stored."""
    step, user, answer = outcome.step, outcome.user_message, outcome.assistant_message
    events: list[StepEvent] = [StepStart(step.id, step.chat_id, user.id)]
    if answer is not None:
        events.append(MessageStart(answer.id, "assistant"))
        if answer.reasoning:
            events.append(ThinkingChunk(answer.id, answer.reasoning))
        events += [_action(a) for a in answer.meta.get("actions") or []]
        if answer.content:
            events.append(MessageChunk(answer.id, answer.content))
        if step.error_code:
            loop = answer.meta.get("loop") or {}
            events.append(MessageError(answer.id, step.error_code, "the original step failed",
                                       preview=loop.get("preview")))
        events.append(MessageEnd(answer.id, answer.status, answer.usage))
    events.append(StepEnd(step.id, step.status, step.timings))
    return events


def _action(stored: dict[str, Any]) -> RuntimeAction:
    """A stored action (its last event, in the answer's `meta.actions`) as the event again."""
    names = {f.name for f in dataclasses.fields(RuntimeAction)} - {"type"}
    given = {k: v for k, v in stored.items() if k in names}
    return RuntimeAction(**{"action": "", "id": None, "text": "", "status": "", "call_id": "",
                            **given})


@dataclass
class StepResult:
    """Folds events into the JSON answer of a non-streamed step."""

    replayed: bool = False
    body: dict[str, Any] = field(default_factory=dict)
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)

    def add(self, event: StepEvent) -> None:
        b = self.body
        if isinstance(event, StepStart):
            b.update(step_id=str(event.step_id), chat_id=str(event.chat_id),
                     user_message_id=str(event.user_message_id))
        elif isinstance(event, ContextInfo):
            b["context"] = event_payload(event)
        elif isinstance(event, MessageStart):
            b["assistant_message_id"] = str(event.message_id)
        elif isinstance(event, MessageChunk):
            self.content.append(event.chunk)
        elif isinstance(event, ThinkingChunk):
            self.reasoning.append(event.chunk)
        elif isinstance(event, MessageError):
            b["error"] = {"code": event.code, "text": event.text}
            if event.preview is not None:
                b["error"]["preview"] = event.preview
        elif isinstance(event, RuntimeAction) and event.status != "started":
            b.setdefault("actions", []).append(event_payload(event))
        elif isinstance(event, StepWarning):
            b.setdefault("warnings", []).append({"code": event.code, "text": event.text})
        elif isinstance(event, MessageEnd):
            b.update(message_status=event.status, usage=event.usage)
        elif isinstance(event, RuntimeMemoryUpdate):
            b["runtime_memory"] = event_payload(event)
        elif isinstance(event, RuntimePatternsUpdate):
            b["runtime_patterns"] = event_payload(event)
        elif isinstance(event, StepEnd):
            b.update(status=event.status, timings=event.timings)

    def json(self) -> dict[str, Any]:
        return {
            **self.body,
            "content": "".join(self.content),
            "reasoning": "".join(self.reasoning),
            "error": self.body.get("error"),
            "warnings": self.body.get("warnings", []),
            "actions": self.body.get("actions", []),
            "replayed": self.replayed,
        }

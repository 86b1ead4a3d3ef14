"""The memory tools the brain may call: `remember` and `forget`.

The step executes each call against the user's FactStore (scoped to the chat's tenant and user,
whatever the arguments say), answers the model with the result and lets it continue. Parsing is
pure; execution goes through the FactStore port.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from chat.types import Chat
from llm.types import ToolCall
from memory.ports import FactStore
from orchestrator.events import RuntimeAction

MAX_FACT_CHARS = 2000
MAX_TOOL_IMPORTANCE = 0.8

log = logging.getLogger("jin.tools")

MEMORY_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "remember",
            "description": (
                "Save a durable fact about the user or their work, to be recalled in later "
                "conversations. One self-contained sentence. Saving a fact that is already known "
                "updates it."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "the fact, one sentence"},
                    "importance": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["text"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "forget",
            "description": (
                "Forget a saved fact that is wrong or that the user asked to forget, by its id "
                "(as shown in recalled memory) or by its exact text."
            ),
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "text": {"type": "string"}},
            },
        },
    },
]


@dataclass(frozen=True)
class ToolResult:
    action: RuntimeAction
    content: str  # what the model reads back, as JSON


def parse_arguments(call: ToolCall) -> dict[str, Any] | str:
    """The call's arguments as an object, or the reason they are unusable."""
    try:
        args = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return "arguments are not valid JSON"
    return args if isinstance(args, dict) else "arguments are not a JSON object"


def invalid(call: ToolCall, reason: str) -> ToolResult:
    """A call that could not run, as the model reads it back."""
    action = RuntimeAction(call.name, None, "", "invalid", call.id, error=reason)
    return ToolResult(action, json.dumps({"ok": False, "error": reason}))


async def execute(
    call: ToolCall, facts: FactStore, chat: Chat, sources: list[uuid.UUID]
) -> ToolResult:
    """Run one call. Mistakes of the model (unknown tool, bad arguments) and a memory that is
    down become results it can read, never a failed step."""
    try:
        return await _execute(call, facts, chat, sources)
    except Exception as exc:  # the boundary of an optional part: the answer goes on
        log.warning("memory tool %s failed: %s", call.name, type(exc).__name__, exc_info=True)
        action = RuntimeAction(call.name, None, "", "failed", call.id,
                               error="memory is unavailable right now")
        return ToolResult(action, json.dumps({"ok": False, "error": "memory is unavailable"}))


async def _execute(
    call: ToolCall, facts: FactStore, chat: Chat, sources: list[uuid.UUID]
) -> ToolResult:
    args = parse_arguments(call)
    if isinstance(args, str):
        return invalid(call, args)
    if call.name == "remember":
        fact = args.get("text")
        if not isinstance(fact, str) or not fact.strip():
            return invalid(call, "remember needs a non-empty `text`")
        importance = args.get("importance", 0.5)
        if not isinstance(importance, int | float) or not 0 <= importance <= 1:
            importance = 0.5
        # Capped: text recalled into a prompt could talk the model into pinning a fact at the
        # top of every later recall; the user's own writes (POST /v1/memories) may go to 1.
        importance = min(importance, MAX_TOOL_IMPORTANCE)
        writes = await facts.write(chat.tenant_id, chat.user_id, [fact[:MAX_FACT_CHARS]],
                                   sources, origin="tool", importance=float(importance))
        if not writes:
            return invalid(call, "the fact is empty once cleaned")
        w = writes[0]
        action = RuntimeAction("remember", str(w.id), w.text, w.action, call.id,
                               replaced=str(w.replaced) if w.replaced else None)
        return ToolResult(action, json.dumps({"ok": True, "id": str(w.id), "result": w.action}))
    if call.name == "forget":
        return await _forget(call, args, facts, chat)
    return invalid(call, f"unknown tool {call.name!r}; the tools are remember and forget")


async def _forget(
    call: ToolCall, args: dict[str, Any], facts: FactStore, chat: Chat
) -> ToolResult:
    raw_id, fact_text = args.get("id"), args.get("text")
    fact_id = None
    if isinstance(raw_id, str) and raw_id.strip():
        try:
            fact_id = uuid.UUID(raw_id.strip())
        except ValueError:
            return invalid(call, f"{raw_id!r} is not a fact id")
    if fact_id is None and not (isinstance(fact_text, str) and fact_text.strip()):
        return invalid(call, "forget needs an `id` or a `text`")
    gone = await facts.forget(chat.tenant_id, chat.user_id, fact_id=fact_id,
                              text_=fact_text if isinstance(fact_text, str) else None)
    if not gone:
        action = RuntimeAction("forget", raw_id if fact_id else None, fact_text or "",
                               "not_found", call.id)
        return ToolResult(action, json.dumps({"ok": False, "error": "no such fact"}))
    action = RuntimeAction("forget", str(gone[0].id), gone[0].text, "forgotten", call.id)
    return ToolResult(action, json.dumps({"ok": True, "forgotten": [str(f.id) for f in gone]}))

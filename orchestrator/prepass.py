"""The cheap pre-pass: no model, deterministic, applied to rows outside the protected tail. Pure.

Rules, each a plain function over rows:
    digest_tool_results   an old tool result becomes one line:
                          `[tool] name(args head) -> result head, N lines`
    dedupe_tool_results   identical results: the newest stays, older ones point to it
    drop_images           old images are dropped, with a note of how many
    shorten_tool_args     huge tool-call arguments are shortened and stay valid JSON
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from chat.types import Message
from llm.ports import TokenCounter

ARGS_HEAD = 80
RESULT_HEAD = 100
MAX_ARGS_CHARS = 2_000
MAX_STRING_CHARS = 200
MAX_LIST_ITEMS = 20

Rule = Callable[[list[Message], list[Message]], list[Message]]


def _calls_by_id(rows: list[Message]) -> dict[str, dict[str, Any]]:
    calls: dict[str, dict[str, Any]] = {}
    for row in rows:
        for call in row.meta.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id"):
                calls[call["id"]] = call
    return calls


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def digest_tool_results(old: list[Message], everything: list[Message]) -> list[Message]:
    calls = _calls_by_id(everything)
    out = []
    for row in old:
        if row.kind != "tool" or row.meta.get("digest"):
            out.append(row)
            continue
        call = calls.get(row.meta.get("tool_call_id", ""), {})
        function = call.get("function") or {}
        name = function.get("name") or row.meta.get("name") or "tool"
        args = _one_line(str(function.get("arguments", "")), ARGS_HEAD)
        lines = row.content.count("\n") + 1 if row.content else 0
        head = _one_line(row.content, RESULT_HEAD)
        digest = f"[tool] {name}({args}) -> {head}, {lines} lines"
        out.append(dataclasses.replace(row, content=digest, meta={**row.meta, "digest": True}))
    return out


def dedupe_tool_results(old: list[Message], everything: list[Message]) -> list[Message]:
    """An old result identical to a later one becomes a back-reference to the later call."""
    later: dict[str, str] = {}  # content -> tool_call_id of its newest occurrence
    for row in everything:
        if row.kind == "tool" and not row.meta.get("digest"):
            later[row.content] = row.meta.get("tool_call_id", "")
    out = []
    for row in old:
        newest = later.get(row.content) if row.kind == "tool" else None
        mine = row.meta.get("tool_call_id", "")
        if newest is not None and newest != mine:
            text = f"[tool] same result as the later call {newest}"
            row = dataclasses.replace(row, content=text, meta={**row.meta, "digest": True})
        out.append(row)
    return out


def drop_images(old: list[Message], _: list[Message]) -> list[Message]:
    out = []
    for row in old:
        images = row.meta.get("images")
        if images:
            meta = {k: v for k, v in row.meta.items() if k != "images"}
            note = f"[{len(images)} image{'s' if len(images) != 1 else ''} omitted]"
            row = dataclasses.replace(row, content=f"{row.content}\n{note}".strip(), meta=meta)
        out.append(row)
    return out


def shorten_json(value: Any) -> Any:
    """Long strings cut, long lists cut, structure kept: the result dumps to valid JSON."""
    if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        return value[:MAX_STRING_CHARS] + f"…[+{len(value) - MAX_STRING_CHARS} chars]"
    if isinstance(value, list):
        kept = [shorten_json(v) for v in value[:MAX_LIST_ITEMS]]
        if len(value) > MAX_LIST_ITEMS:
            kept.append(f"…[+{len(value) - MAX_LIST_ITEMS} items]")
        return kept
    if isinstance(value, dict):
        return {k: shorten_json(v) for k, v in value.items()}
    return value


def _shorten_arguments(arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return json.dumps(shorten_json(str(arguments)))
    return json.dumps(shorten_json(parsed), ensure_ascii=False)


def shorten_tool_args(old: list[Message], _: list[Message]) -> list[Message]:
    out = []
    for row in old:
        calls = row.meta.get("tool_calls")
        if not calls or not any(
            len(str((c.get("function") or {}).get("arguments", ""))) > MAX_ARGS_CHARS
            for c in calls
        ):
            out.append(row)
            continue
        new_calls = []
        for call in calls:
            function = dict(call.get("function") or {})
            args = str(function.get("arguments", ""))
            if len(args) > MAX_ARGS_CHARS:
                function["arguments"] = _shorten_arguments(args)
            new_calls.append({**call, "function": function})
        out.append(dataclasses.replace(row, meta={**row.meta, "tool_calls": new_calls}))
    return out


RULES: tuple[Rule, ...] = (
    dedupe_tool_results, digest_tool_results, drop_images, shorten_tool_args,
)


def prepass(rows: list[Message], protected: int, counter: TokenCounter) -> list[Message]:
    """Apply every rule to rows[:-protected] (the newest `protected` rows stay verbatim).

    Token counts of changed rows are recounted, arguments of tool calls included.
    """
    cut = max(len(rows) - protected, 0)
    old, tail = rows[:cut], rows[cut:]
    if not any(_touchable(row) for row in old):
        return rows  # plain conversation: nothing for the rules to do (the common case)
    changed = old
    for rule in RULES:
        changed = rule(changed, rows)
    recounted = [
        row if row is before else dataclasses.replace(row, token_count=_tokens(row, counter))
        for row, before in zip(changed, old, strict=True)
    ]
    return recounted + tail


def _touchable(row: Message) -> bool:
    return row.kind == "tool" or "tool_calls" in row.meta or "images" in row.meta


def _tokens(row: Message, counter: TokenCounter) -> int:
    calls = row.meta.get("tool_calls") or []
    args = "".join(str((c.get("function") or {}).get("arguments", "")) for c in calls)
    return counter.count(row.content) + counter.count(args)

"""Compaction policy and the summary protocol. Pure: no I/O, no clock (time is passed in).

    decide        compact now? `rows_left_out` is hard (messages never leave the window
                  without a summary); `over_trigger` is soft and yields to anti-thrash
    choose_span   which rows to summarise: the oldest, never the current turn, never half a
                  tool call, at most what one helper call can take
    helper_prompt a stable prefix (system text) and the span, merged into the previous summary
    parse_summary reject output cut off by the length limit or missing a section
    extractive    the deterministic summary written when the helper is down or backing off
    after_pass / after_failure   the counters kept on the chat
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any, Literal

from chat.types import Message
from llm.types import PromptMessage
from orchestrator.context import neutralize, units
from orchestrator.coverage import may_hold_items

SECTIONS = ("Resolved", "Pending", "Active task", "Decisions", "Facts")
KEPT = "Kept verbatim"  # lines verification put back (orchestrator/coverage.py)
SPILLED = "- (older facts are kept in durable memory)"

HELPER_SYSTEM = (
    "You maintain the running summary of a conversation between a user and an assistant.\n"
    "You get the previous summary and the messages that follow it. Write the new summary: the "
    "previous one merged with what the messages add, with exactly these sections, in this "
    "order, as markdown headings:\n"
    + "\n".join(f"## {s}" for s in SECTIONS)
    + "\nUnder each, short bullet lines. Keep every number, date, name, identifier, URL, e-mail "
    "address, quoted string and open question verbatim. Drop pleasantries. Keep what is still "
    "pending or undecided. Write nothing before the first heading or after the last section."
)


class SummaryRejected(Exception):
    """The helper's output cannot stand as a summary; the previous one stays."""


@dataclass(frozen=True)
class CompactionPolicy:
    trigger_ratio: float = 0.75
    target_ratio: float = 0.5
    min_saving: float = 0.10  # a pass saving less than this share of the prompt is "small"
    thrash_limit: int = 2  # this many small passes in a row stop soft triggers
    backoff_base: float = 5.0  # seconds after the first helper failure; doubles each time
    backoff_max: float = 600.0
    span_max_tokens: int = 6000  # the most one helper call is given to summarise
    answer_tokens: int = 1024  # the helper's answer budget
    summary_max_ratio: float = 0.25  # above this share of the budget, facts spill to memory


@dataclass(frozen=True)
class CompactionState:
    """Counters persisted on the chat (chats.compaction)."""

    passes: int = 0
    helper_calls: int = 0
    helper_failures: int = 0  # in a row
    small_passes: int = 0  # in a row
    retry_at: float = 0.0  # the helper is not called before this (epoch seconds)
    last_through: int | None = None  # position of the last row summarised

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> CompactionState:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in (data or {}).items() if k in known})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Compact:
    reason: Literal["rows_left_out", "over_trigger"]
    type: Literal["compact"] = "compact"


@dataclass(frozen=True)
class Skip:
    reason: str
    type: Literal["skip"] = "skip"


def decide(
    total_tokens: int, budget_total: int, rows_left_out: bool, state: CompactionState,
    policy: CompactionPolicy,
) -> Compact | Skip:
    if rows_left_out:
        return Compact("rows_left_out")
    if total_tokens <= budget_total * policy.trigger_ratio:
        return Skip("under_trigger")
    if state.small_passes >= policy.thrash_limit:
        return Skip("recent_passes_saved_little")
    return Compact("over_trigger")


def policy_for(policy: CompactionPolicy, overrides: dict[str, float | None]) -> CompactionPolicy:
    """The deployment's policy with a chat's own trigger and target, where it sets them."""
    changes: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    return replace(policy, **changes)


def may_call_helper(state: CompactionState, now: float) -> bool:
    return now >= state.retry_at


def choose_span(
    rows: list[Message], keep_tokens: int, max_span_tokens: int
) -> tuple[list[Message], list[Message]]:
    """(span, kept): rows is everything after the summary, oldest first.

    Kept: the newest whole units within keep_tokens, and always the current turn (from the last
    user message on). Span: the oldest units before those, at most max_span_tokens (at least one
    unit, so a pass always makes progress).
    """
    groups = units(rows)
    last_user = max((i for i, u in enumerate(groups) if u[0].kind == "user"), default=len(groups))
    start, used = len(groups), 0
    for i in range(len(groups) - 1, -1, -1):
        unit_cost = sum(m.cost for m in groups[i])
        if i < last_user and used + unit_cost > keep_tokens:
            break
        start, used = i, used + unit_cost
    span_units: list[list[Message]] = []
    taken = 0
    for unit in groups[:start]:
        unit_cost = sum(m.cost for m in unit)
        if span_units and taken + unit_cost > max_span_tokens:
            break
        span_units.append(unit)
        taken += unit_cost
    span = [m for u in span_units for m in u]
    kept = [m for u in groups[len(span_units) :] for m in u]
    return span, kept


def render_span(span: list[Message]) -> str:
    lines = []
    for m in span:
        who = m.meta.get("name") if m.kind == "tool" else m.kind
        content = m.content
        if m.meta.get("tool_calls"):
            functions = [c.get("function") or {} for c in m.meta["tool_calls"]]
            calls = ", ".join(f"{f.get('name')}({f.get('arguments', '')})" for f in functions)
            content = f"{content} [calls: {calls}]".strip()
        lines.append(f"[{who or m.kind}] {content}")
    return "\n".join(lines)


def helper_prompt(previous: str, span: list[Message]) -> list[PromptMessage]:
    # What the user wrote must not end either fence early and pass for the helper's orders.
    earlier = neutralize(neutralize(previous.strip(), "previous-summary"), "messages")
    said = neutralize(neutralize(render_span(span), "messages"), "previous-summary")
    body = (
        f"<previous-summary>\n{earlier or '(none yet)'}\n</previous-summary>\n"
        f"<messages>\n{said}\n</messages>\n"
        "Write the merged summary now."
    )
    return [PromptMessage("system", HELPER_SYSTEM), PromptMessage("user", body)]


_HEADING = re.compile(r"^#{1,6}\s*(.+?)\s*:?\s*$")


def sections_of(text: str) -> dict[str, list[str]]:
    """The lines under each known heading (case-insensitive); unknown headings are dropped."""
    out: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        match = _HEADING.match(line.strip())
        if match:
            name = match.group(1).strip().lower()
            current = next((s for s in (*SECTIONS, KEPT) if s.lower() == name), None)
            if current is not None:
                out.setdefault(current, [])
            continue
        if current is not None and line.strip():
            out[current].append(line.rstrip())
    return out


def render_sections(sections: dict[str, list[str]]) -> str:
    names = [*SECTIONS, KEPT] if sections.get(KEPT) else list(SECTIONS)
    return "\n\n".join(
        f"## {name}\n" + "\n".join(sections.get(name) or ["- (none)"]) for name in names
    ) + "\n"


def fact_lines(summary: str) -> list[str]:
    """The lines a memory flush keeps: the facts, and what verification put back."""
    sections = sections_of(summary)
    lines = sections.get("Facts", []) + sections.get(KEPT, [])
    return [line for line in lines if line not in ("- (none)", SPILLED)]


def trim_summary(summary: str, cap_tokens: int, measure: Callable[[str], int]) -> str:
    """Drop the oldest fact lines (put back lines first) until the summary fits cap_tokens;
    the caller has written them to durable memory. Other sections are never trimmed."""
    sections = sections_of(summary)
    text = render_sections(sections)
    for name in (KEPT, "Facts"):
        if measure(text) <= cap_tokens:
            break
        lines = [line for line in sections.get(name, []) if line != SPILLED]

        def keeping(
            n: int, name: str = name, lines: list[str] = lines,
            sections: dict[str, list[str]] = sections,
        ) -> str:
            kept = lines[len(lines) - n :] if n else []
            spilled = [SPILLED, *kept] if name == "Facts" else kept
            return render_sections({**sections, name: spilled})

        # The most of the newest lines that fit, by bisection: O(log n) measurements.
        low, high = 0, len(lines)
        while low < high:
            mid = (low + high + 1) // 2
            if measure(keeping(mid)) <= cap_tokens:
                low = mid
            else:
                high = mid - 1
        sections = sections_of(keeping(low))
        text = render_sections(sections)
    return text


def parse_summary(text: str, finish_reason: str | None) -> str:
    if finish_reason == "length":
        raise SummaryRejected("the helper's summary was cut off by its length limit")
    sections = sections_of(text)
    missing = [s for s in SECTIONS if s not in sections]
    if missing:
        raise SummaryRejected(f"the helper's summary lacks: {', '.join(missing)}")
    return render_sections(sections)


def extractive(previous: str, span: list[Message]) -> str:
    """A deterministic summary without a model: the previous sections, plus the span's lines
    that carry checkable items (under Facts), its open questions (Pending) and its last user
    request (Active task)."""
    sections = sections_of(previous)
    merged = {name: list(sections.get(name, [])) for name in SECTIONS}
    merged["Pending"] = [line for line in merged["Pending"] if line != "- (none)"]
    merged["Facts"] = [line for line in merged["Facts"] if line != "- (none)"]
    merged[KEPT] = list(sections.get(KEPT, []))
    for m in span:
        for line in m.content.splitlines():
            stripped = line.strip()
            if not stripped:
                continue
            if m.kind == "user" and stripped.endswith("?"):
                merged["Pending"].append(f"- [{m.kind}] {stripped}")
            elif may_hold_items(stripped):
                merged["Facts"].append(f"- [{m.kind}] {stripped}")
    users = [m for m in span if m.kind == "user" and m.content.strip()]
    if users:
        merged["Active task"] = [f"- {' '.join(users[-1].content.split())[:300]}"]
    return render_sections(merged)


def after_pass(
    state: CompactionState, *, tokens_before: int, tokens_after: int, through: int,
    helper_called: bool, helper_failed: bool, now: float, policy: CompactionPolicy,
    budget_total: int,
) -> CompactionState:
    saved = (tokens_before - tokens_after) / tokens_before if tokens_before else 0.0
    # A pass that saved little, or could not get under the trigger, counts toward anti-thrash.
    small = saved < policy.min_saving or tokens_after > budget_total * policy.trigger_ratio
    failures = state.helper_failures + 1 if helper_failed else 0 if helper_called else (
        state.helper_failures
    )
    retry_at = state.retry_at
    if helper_failed:
        delay = min(policy.backoff_base * 2 ** (failures - 1), policy.backoff_max)
        retry_at = now + delay
    return replace(
        state,
        passes=state.passes + 1,
        helper_calls=state.helper_calls + (1 if helper_called else 0),
        helper_failures=failures,
        small_passes=state.small_passes + 1 if small else 0,
        retry_at=retry_at,
        last_through=through,
    )


def hidden_before(summary: Message | None) -> datetime | None:
    """When the chat was last started over: its rows from before are not recalled into it.
    A "start over" row says so by itself; the summaries written after it carry its time."""
    if summary is None:
        return None
    if summary.meta.get("reset"):
        return summary.created_at
    carried = summary.meta.get("recall_hidden_before")
    return datetime.fromisoformat(carried) if isinstance(carried, str) else None

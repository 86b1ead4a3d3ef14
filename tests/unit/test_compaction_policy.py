"""Compaction policy and summary protocol, without a database or a model."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from chat.types import MESSAGE_OVERHEAD, Message
from orchestrator.compaction_policy import (
    SECTIONS,
    Compact,
    CompactionPolicy,
    CompactionState,
    Skip,
    SummaryRejected,
    after_pass,
    choose_span,
    decide,
    extractive,
    helper_prompt,
    parse_summary,
)
from orchestrator.coverage import extract, verify

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = CompactionPolicy()


def msg(kind: str, content: str, tokens: int = 10, **meta: Any) -> Message:
    return Message(
        id=uuid.uuid4(), chat_id=uuid.uuid4(), position=0, kind=kind,  # type: ignore[arg-type]
        content=content, status="complete", token_count=tokens, created_at=NOW, meta=meta,
    )


C = 10 + MESSAGE_OVERHEAD


def test_rows_left_out_always_compact_and_soft_triggers_yield_to_anti_thrash() -> None:
    fresh, thrashing = CompactionState(), CompactionState(small_passes=2)
    assert decide(100, 1000, True, thrashing, POLICY) == Compact("rows_left_out")
    assert decide(700, 1000, False, fresh, POLICY) == Skip("under_trigger")
    assert decide(800, 1000, False, fresh, POLICY) == Compact("over_trigger")
    assert decide(800, 1000, False, thrashing, POLICY) == Skip("recent_passes_saved_little")


def test_span_is_the_oldest_rows_and_never_the_current_turn_or_half_a_tool_call() -> None:
    call = msg("assistant", "", tool_calls=[{"id": "c"}])
    rows = [msg("user", "q0"), msg("assistant", "a0"), msg("user", "q1"), call,
            msg("tool", "r", tool_call_id="c"), msg("assistant", "a1"), msg("user", "q2"),
            msg("assistant", "a2")]
    span, kept = choose_span(rows, keep_tokens=2 * C, max_span_tokens=10_000)
    assert [m.content for m in kept] == ["q2", "a2"]
    assert span + kept == rows
    span, kept = choose_span(rows, keep_tokens=4 * C, max_span_tokens=10_000)
    assert [m.content for m in kept] == ["a1", "q2", "a2"]  # the call and its result go together
    span, kept = choose_span(rows, keep_tokens=0, max_span_tokens=3 * C)
    assert [m.content for m in span] == ["q0", "a0", "q1"]  # bounded by what one call can take
    assert [m.content for m in choose_span(rows[-2:], 0, 100)[1]] == ["q2", "a2"]


def test_helper_prompt_has_a_stable_prefix() -> None:
    one = helper_prompt("", [msg("user", "hello")])
    two = helper_prompt("## Facts\n- x", [msg("user", "other")])
    assert one[0] == two[0] and one[0].role == "system"
    assert "<previous-summary>" in two[1].content and "[user] other" in two[1].content


def test_summaries_cut_off_or_missing_sections_are_rejected() -> None:
    good = "\n".join(f"## {s}\n- item" for s in SECTIONS)
    assert parse_summary(good, "stop").startswith("## Resolved")
    with pytest.raises(SummaryRejected, match="cut off"):
        parse_summary(good, "length")
    with pytest.raises(SummaryRejected, match="Decisions"):
        parse_summary(good.replace("## Decisions", "## Thoughts"), "stop")
    with pytest.raises(SummaryRejected):
        parse_summary("Sure! Here is a summary of the chat.", "stop")


def test_extractive_summary_keeps_every_checkable_item_deterministically() -> None:
    span = [
        msg("user", "Ship version 2.4.1 to https://example.com by 2026-04-01?"),
        msg("assistant", "Noted. Ticket INC-4411 tracks it; budget is 12,500 EUR."),
        msg("user", "thanks"),
    ]
    text = extractive("## Facts\n- the user is Ana", span)
    assert text == extractive("## Facts\n- the user is Ana", span)
    assert verify(extract("\n".join(m.content for m in span)), text, []).coverage == 1.0
    assert "- the user is Ana" in text and text.count("## ") == len(SECTIONS)


def test_helper_failures_back_off_with_growing_delays_and_small_passes_count() -> None:
    state = CompactionState()
    delays = []
    for _ in range(4):
        state = after_pass(state, tokens_before=1000, tokens_after=500, through=1,
                           helper_called=True, helper_failed=True, now=100.0, policy=POLICY,
                           budget_total=10_000)
        delays.append(state.retry_at - 100.0)
    assert delays == [5.0, 10.0, 20.0, 40.0]
    state = after_pass(state, tokens_before=1000, tokens_after=950, through=2,
                       helper_called=True, helper_failed=False, now=200.0, policy=POLICY,
                       budget_total=10_000)
    assert state.helper_failures == 0 and state.small_passes == 1 and state.passes == 5
    assert CompactionState.from_json(state.to_json()) == state
    # A pass that stays over the trigger counts as small too, however much it saved.
    stuck = after_pass(CompactionState(), tokens_before=4000, tokens_after=900, through=3,
                       helper_called=True, helper_failed=False, now=0.0, policy=POLICY,
                       budget_total=1000)
    assert stuck.small_passes == 1


def test_an_oversized_summary_sheds_its_oldest_facts_and_only_facts() -> None:
    from orchestrator.compaction_policy import SPILLED, fact_lines, sections_of, trim_summary

    facts = [f"- fact number {i} with code LCK-{i:04d}" for i in range(100)]
    big = "\n".join(f"## {s}\n- keep {s}" for s in SECTIONS[:4]) + "\n## Facts\n" + "\n".join(facts)
    assert fact_lines(big) == facts
    trimmed = trim_summary(big, 200, lambda t: len(t.split()))
    assert len(trimmed.split()) <= 200
    kept = sections_of(trimmed)
    assert kept["Facts"][0] == SPILLED and kept["Facts"][-1] == facts[-1]  # newest stay
    assert all(kept[s] == [f"- keep {s}"] for s in SECTIONS[:4])
    assert trim_summary(big, 10_000, lambda t: len(t.split())).count("LCK-") == 100


def test_a_start_over_stays_in_force_for_recall_through_later_summaries() -> None:
    import uuid
    from datetime import UTC, datetime

    from chat.types import Message
    from orchestrator.compaction_policy import hidden_before

    when = datetime(2026, 11, 1, tzinfo=UTC)

    def row(meta: dict) -> Message:
        return Message(id=uuid.uuid4(), chat_id=uuid.uuid4(), position=1, kind="summary",
                       content="", status="complete", token_count=0, created_at=when, meta=meta)

    assert hidden_before(row({"reset": True})) == when
    assert hidden_before(row({"recall_hidden_before": "2026-10-01T00:00:00+00:00"})) == (
        datetime(2026, 10, 1, tzinfo=UTC))
    assert hidden_before(row({})) is None and hidden_before(None) is None

"""What an L3 snapshot carries of a chat's L1 state, and how the helper's digest is checked or
replaced: pure, without a model or a database."""

from __future__ import annotations

import pytest

from llm.tokens import TiktokenCounter
from memory.runtime_state import UNRESOLVED_KEY, Line, State, Tombstone
from memory.session_digest import (
    FALLBACK_HEADING,
    DigestRejected,
    carried,
    check_digest,
    digest_prompt,
    fallback,
)

STATE = State((
    Line(UNRESOLVED_KEY, "the last turn did not finish", 1.0),
    Line("topic", "trains", 0.3),
    Line("user_name", "Ann", 0.25, durable=True),
    Line("city", "Rome", 0.9),
    Line("mood", "tired", 0.21),
), (Tombstone("pet", "a cat"),))


def test_a_snapshot_carries_durable_lines_first_then_the_strongest_in_their_order() -> None:
    kept = carried(STATE, 3)
    assert [line.key for line in kept.lines] == ["topic", "user_name", "city"]
    assert kept.tombstones == STATE.tombstones  # a deleted line stays deleted in the new chat
    assert [line.key for line in carried(STATE, 1).lines] == ["user_name"]
    # The old chat's unfinished turn is not the new chat's.
    assert UNRESOLVED_KEY not in [line.key for line in carried(STATE, 50).lines]


def test_the_helper_reads_the_title_the_lines_and_l2_only_when_there_is_some() -> None:
    asked = digest_prompt("  Rome\n trip ", carried(STATE, 50))[-1].content
    assert "Session title: Rome trip" in asked and "city: Rome" in asked
    assert "How the conversation went" not in asked
    with_l2 = digest_prompt("", carried(STATE, 50), "topic shifted twice")[-1].content
    assert "(untitled)" in with_l2 and "How the conversation went:\ntopic shifted twice" in with_l2


def test_a_digest_cut_off_or_empty_is_rejected_and_whitespace_is_tidied() -> None:
    assert check_digest("  Ann   plans\n\n\n\nRome.  ", "stop") == "Ann plans\n\nRome."
    with pytest.raises(DigestRejected) as cut:
        check_digest("Ann plans a trip to", "length")
    assert cut.value.reason == "truncated"
    with pytest.raises(DigestRejected) as empty:
        check_digest(" \n\t ", "stop")
    assert empty.value.reason == "empty"


def test_jins_own_digest_holds_the_strongest_lines_within_the_budget() -> None:
    counter = TiktokenCounter()
    whole = fallback(carried(STATE, 50), 400, counter.count)
    assert whole.startswith(FALLBACK_HEADING)
    assert whole.index("user_name: Ann") < whole.index("city: Rome") < whole.index("mood")
    small = fallback(carried(STATE, 50), 16, counter.count)
    assert counter.count(small) <= 16 and "user_name: Ann" in small and "mood" not in small
    assert fallback(State(), 400, counter.count) == ""

"""Whom a question is about, from how the history speaks the names it holds (memory/speakers.py),
and what that does to the ranking."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from memory.ranking import Candidate, RecallConfig, about_side, rank
from memory.speakers import Addressed, about

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def test_a_name_the_user_side_addresses_is_the_assistant_sides_and_the_other_way_round() -> None:
    assert Addressed(by_user=11, by_assistant=0, user_mentions=12).side() == "assistant"
    assert Addressed(by_user=1, by_assistant=9, assistant_mentions=9).side() == "user"
    assert Addressed(6, 4, user_mentions=6, assistant_mentions=4).side() is None  # both address
    assert Addressed(2, 0, user_mentions=2).side() is None  # too seldom to tell


def test_a_name_both_sides_write_tells_no_side_however_one_side_addresses_it() -> None:
    """The user writes "Anna, ..." of their partner; an assistant that names her back in its
    answers is not Anna: people seldom write their own name."""
    assert Addressed(by_user=4, by_assistant=0, user_mentions=20,
                     assistant_mentions=9).side() is None


def test_a_name_that_labels_one_sides_messages_is_that_side() -> None:
    """"Caroline: ..." on every user message: Caroline is the user, whatever the greetings."""
    assert Addressed(by_user=0, by_assistant=12, user_labels=150).side() == "user"
    assert Addressed(by_user=9, by_assistant=0, assistant_labels=40).side() == "assistant"


def test_a_question_naming_both_sides_or_none_told_is_about_nobody() -> None:
    david = Addressed(11, 0, user_mentions=11)
    sofia = Addressed(0, 10, assistant_mentions=10)
    kim = Addressed(1, 1, user_mentions=1, assistant_mentions=1)
    assert about([david]) == "assistant"
    assert about([david, kim]) == "assistant"
    assert about([david, sofia]) is None
    assert about([kim]) is None and about([]) is None


def _message(text: str, role: str, dense: int) -> Candidate:
    return Candidate(uuid.uuid4(), "message", text, NOW, role, dense_rank=dense)


def test_a_question_about_one_side_puts_its_own_line_above_the_others_better_match() -> None:
    candidates = [_message("My neighbour's parrot ate a cake.", "user", 1),
                  _message("I can't stand heights, I froze on the bridge.", "assistant", 2)]
    config = RecallConfig()

    def first(cfg: RecallConfig) -> str:
        return rank(candidates, NOW, cfg, lambda s: len(s.split()))[0].text

    assert first(config).startswith("My neighbour's")  # nobody named: the better match
    assert first(about_side("assistant", config)).startswith("I can't stand")
    assert first(about_side("user", config)).startswith("My neighbour's")
    assert about_side("assistant", RecallConfig(speaker_weight=1.0)) == \
        RecallConfig(speaker_weight=1.0)
    assert about_side(None, config) == config

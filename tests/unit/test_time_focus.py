"""A question that names a moment is answered from that moment (memory/time_focus.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory.ranking import RecallConfig, recency
from memory.time_focus import focused, time_focus

NOW = datetime(2026, 11, 20, 10, tzinfo=UTC)


@pytest.mark.parametrize(("question", "month", "year"), [
    ("what did I say in May about the dentist?", 5, 2026),
    ("What about March 2025?", 3, 2025),
    ("what was the plan for December", 12, 2025),  # not yet this year: last year's
    ("что я говорил в марте про отпуск", 3, 2026),
    ("какие планы были в декабре", 12, 2025),
    ("що я казав у травні про собаку", 5, 2026),
    ("як пройшов вересень", 9, 2026),
])
def test_a_named_month_is_its_latest_occurrence_up_to_the_question(
    question: str, month: int, year: int
) -> None:
    focus = time_focus(question, NOW)
    assert focus is not None and focus.at is not None
    assert (focus.at.year, focus.at.month) == (year, month) and focus.span_days >= 15


@pytest.mark.parametrize(("question", "days_back"), [
    ("what did I tell you last week?", 7), ("what happened two weeks ago", 14),
    ("3 months ago I mentioned a trip", 91.2), ("yesterday I said something", 1),
    ("что я говорил на прошлой неделе", 7), ("що було минулого тижня", 7),
    ("три месяца назад", 91.2), ("два тижні тому", 14),
])
def test_a_relative_moment_counts_back_from_the_question(question: str, days_back: float) -> None:
    focus = time_focus(question, NOW)
    assert focus is not None and focus.at is not None
    assert abs((NOW - focus.at) / timedelta(days=1) - days_back) < 0.01


@pytest.mark.parametrize("question", [
    "May I ask what my dog's name is?", "what is my sister's name", "яка трава росте в саду",
    "наше майбутнє", "the first", ])
def test_no_moment_is_read_into_a_question_that_names_none(question: str) -> None:
    focus = time_focus(question, NOW)
    assert focus is None or (question == "the first" and focus.earliest)


def test_the_first_time_turns_recency_off_and_a_moment_measures_it_from_there() -> None:
    cfg = RecallConfig(recency_floor=0.35, half_life_days=90, freshness_days=14)
    _, first = focused("when did I first mention Porto?", NOW, cfg)
    assert first.recency_floor == 1.0
    may_item, november_item = datetime(2026, 5, 10, tzinfo=UTC), datetime(2026, 11, 18, tzinfo=UTC)
    at, may = focused("what did I say in May about Porto?", NOW, cfg)
    assert recency(may_item, at, may) == 1.0 > recency(november_item, at, may)
    assert recency(may_item, NOW, cfg) < recency(november_item, NOW, cfg)  # without the focus
    assert focused("what did I say about Porto?", NOW, cfg) == (NOW, cfg)


@pytest.mark.parametrize("question", [
    "WHAT DID I SAY LAST WEEK", "Two Weeks Ago I said", "Yesterday?", "В МАРТЕ", "У Травні",
    "Back in 2019", "Earliest mention of Porto", "КОЛИ Я ВПЕРШЕ", "ДВА ТИЖНІ ТОМУ",
    *(f"in {m.title()}" for m in ("january", "february", "march", "april", "may", "june",
                                  "july", "august", "september", "october", "november",
                                  "december")),
    *(f"в {m}" for m in ("январе", "феврале", "марте", "апреле", "мае", "июне", "июле",
                         "августе", "сентябре", "октябре", "ноябре", "декабре")),
    *(f"у {m}" for m in ("січні", "лютому", "березні", "квітні", "травні", "червні", "липні",
                         "серпні", "вересні", "жовтні", "листопаді", "грудні")),
])
def test_a_moment_is_found_whatever_the_case_of_its_words(question: str) -> None:
    # (The patterns run only on questions that hold one of their words: that look must be as
    # blind to case as the patterns are.)
    assert time_focus(question, NOW) is not None

"""TIME_COMPRESS's ladder: detail within a day, daily within a week, weekly within a month,
monthly within a year, yearly after; quiet topics only; a period of one event stays. And what a
TIME_COMPRESS field shows of the summaries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory.events.compression import Dated, Merge, level_of, period, plan
from memory.events.schema import load_schemas
from memory.events.summaries import Summarised, compressed_field, read_answer

NOW = datetime(2026, 12, 3, 18, 0, tzinfo=UTC)  # a Thursday


def ago(**span: float) -> datetime:
    return NOW - timedelta(**span)


def event(n: int, at: datetime, topic: str = "recursion",
          owner: tuple[str, str] = ("t", "u")) -> Dated:
    return Dated(f"e{n}", owner, topic, "discussion", at)


def test_the_ladder_by_age() -> None:
    assert [level_of(ago(**a), NOW) for a in (
        {"hours": 23}, {"days": 2}, {"days": 8}, {"days": 40}, {"days": 400})] == [
        None, "daily", "weekly", "monthly", "yearly"]


def test_periods_are_calendar_days_iso_weeks_months_and_years() -> None:
    at = datetime(2026, 11, 18, 15, 30, tzinfo=UTC)  # a Wednesday
    assert period(at, "daily") == (datetime(2026, 11, 18, tzinfo=UTC),
                                   datetime(2026, 11, 19, tzinfo=UTC))
    assert period(at, "weekly") == (datetime(2026, 11, 16, tzinfo=UTC),
                                    datetime(2026, 11, 23, tzinfo=UTC))
    assert period(datetime(2026, 12, 31, 23, tzinfo=UTC), "monthly") == (
        datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert period(at, "yearly") == (datetime(2026, 1, 1, tzinfo=UTC),
                                    datetime(2027, 1, 1, tzinfo=UTC))


def test_a_quiet_topics_events_merge_a_period_each_and_a_lone_one_stays() -> None:
    two_days = datetime(2026, 12, 1, 9, tzinfo=UTC)
    events = [event(1, two_days), event(2, two_days + timedelta(hours=5)),
              event(3, ago(days=3)),  # alone on its day
              event(4, ago(days=400)), event(5, ago(days=420))]
    assert plan(events, NOW) == [
        Merge(("t", "u"), "recursion", "yearly", datetime(2025, 1, 1, tzinfo=UTC),
              datetime(2026, 1, 1, tzinfo=UTC), ("e5", "e4")),
        Merge(("t", "u"), "recursion", "daily", datetime(2026, 12, 1, tzinfo=UTC),
              datetime(2026, 12, 2, tzinfo=UTC), ("e1", "e2")),
    ]


def test_an_active_topic_and_another_users_events_are_left_alone() -> None:
    old = datetime(2026, 12, 1, 9, tzinfo=UTC)
    events = [event(1, old, "game ai"), event(2, old, "Game AI!"), event(3, ago(hours=2),
                                                                          "game ai"),
              event(4, old, owner=("t", "v")),
              event(5, old + timedelta(hours=1), owner=("t", "w"))]
    assert plan(events, NOW) == []  # active branch; one event per owner


def test_a_time_compress_field_shows_the_summaries_of_its_types_within_its_window() -> None:
    profile = load_schemas().entity("user_profile")
    assert profile is not None
    history = profile.field("history")  # discussion and profile_fact, within 365 days
    assert history is not None

    def summary(n: int, days: float, types: tuple[str, ...], text: str) -> Summarised:
        at = ago(days=days)
        return Summarised(f"s{n}", "garden", "monthly", at.replace(day=1), text, types, at)

    text, ids = compressed_field(history, [
        summary(1, 40, ("discussion",), "Planted   tomatoes."),
        summary(2, 400, ("discussion",), "Too old."),
        summary(3, 100, ("task_update",), "Not a type it reads."),
        summary(4, 200, ("profile_fact", "task_update"), "Moved to a house with a garden."),
    ], NOW)
    assert ids == ["s4", "s1"]  # oldest first
    assert text == ("- 2026-05-01 (monthly) garden: Moved to a house with a garden.\n"
                    "- 2026-10-01 (monthly) garden: Planted tomatoes.")


def test_the_helpers_summary_is_trimmed_and_an_empty_one_is_none() -> None:
    assert read_answer("  The user planted basil.\n") == "The user planted basil."
    assert read_answer("```\nPlanted basil.\n```") == "Planted basil."
    assert read_answer("Planted\x00 basil.") == "Planted basil."
    assert read_answer(" \n ") is None

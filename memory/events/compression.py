"""TIME_COMPRESS: which events merge into which summary, by the default ladder (pure).

Fresh events stay detailed; past a window, the events of a topic that has gone quiet merge into
one summary event a period, which keeps pointers to its sources. The ladder follows VikingDB's
hosted memory: detail kept within a day, daily summaries within a week, weekly within a month,
monthly within a year, yearly after that. A topic is active while it has an event within the
detail window: none of its events merge then (its branch is still growing). A period with one
event alone has nothing to merge with and stays as it is.

A summary is an event too (its `level` says which rung wrote it), so summaries merge again up
the ladder: a week's daily summaries become one weekly summary once the week is past.

This module plans (`jin memory compress --dry-run` shows the plan); memory/events/compressor.py
writes the summaries, and memory/events/compression_store.py gives the sources their TTL in the
summary's transaction and purges them only once their summary is committed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from memory.events.segments import topic_key

Level = Literal["daily", "weekly", "monthly", "yearly"]

# (age under which, the period events of that age merge by); older than the last: yearly.
LADDER: tuple[tuple[timedelta, Level | None], ...] = (
    (timedelta(days=1), None),  # detail
    (timedelta(days=7), "daily"),
    (timedelta(days=30), "weekly"),
    (timedelta(days=365), "monthly"),
)


@dataclass(frozen=True)
class Dated:
    """An event as compression sees it."""

    id: str
    owner: tuple[str, str]  # tenant and user: events of two users never merge
    topic: str
    type: str
    at: datetime  # when it happened (its last source message)


@dataclass(frozen=True)
class Merge:
    """Events of one owner, topic and period that would become one summary event."""

    owner: tuple[str, str]  # tenant and user
    topic: str
    level: Level
    start: datetime  # the period, [start, end)
    end: datetime
    sources: tuple[str, ...]  # the event ids, oldest first


def level_of(at: datetime, now: datetime) -> Level | None:
    """The ladder's step for an event of that time: None while it stays detailed."""
    age = now - at
    for under, level in LADDER:
        if age < under:
            return level
    return "yearly"


def period(at: datetime, level: Level) -> tuple[datetime, datetime]:
    """The calendar period (UTC) of that level holding `at`: a day, an ISO week from Monday, a
    month, a year. `at` has a time zone (Postgres's timestamptz)."""
    day = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if level == "daily":
        return day, day + timedelta(days=1)
    if level == "weekly":
        monday = day - timedelta(days=day.weekday())
        return monday, monday + timedelta(days=7)
    if level == "monthly":
        first = day.replace(day=1)
        after = first.replace(year=first.year + 1, month=1) if first.month == 12 else \
            first.replace(month=first.month + 1)
        return first, after
    first = day.replace(month=1, day=1)
    return first, first.replace(year=first.year + 1)


def plan(events: Iterable[Dated], now: datetime) -> list[Merge]:
    """The merges the ladder asks for now, by owner, topic and period."""
    by_topic: dict[tuple[tuple[str, str], str], list[Dated]] = {}
    names: dict[tuple[tuple[str, str], str], str] = {}
    for event in events:
        key = (event.owner, topic_key(event.topic))
        by_topic.setdefault(key, []).append(event)
        names.setdefault(key, event.topic)
    merges: list[Merge] = []
    for key, group in sorted(by_topic.items()):
        if any(level_of(e.at, now) is None for e in group):
            continue  # an active branch: it has an event within the detail window
        periods: dict[tuple[Level, datetime, datetime], list[Dated]] = {}
        for event in group:
            level = level_of(event.at, now)
            assert level is not None  # active branches were skipped above
            periods.setdefault((level, *period(event.at, level)), []).append(event)
        for (level, start, end), members in sorted(periods.items(), key=lambda p: p[0][1]):
            if len(members) > 1:
                members.sort(key=lambda e: e.at)
                merges.append(Merge(key[0], names[key], level, start, end,
                                    tuple(e.id for e in members)))
    return merges

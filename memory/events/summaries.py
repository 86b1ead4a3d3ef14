"""A summary event's text: the helper's, asked with a byte-stable prefix, or a merge of the
sources' own texts when the helper cannot answer; and the text of an entity's TIME_COMPRESS
field, made of the summaries it reads (pure).

One helper call per group of events. The system message is the same bytes for every group, so
the model server's prefix cache stays warm across a compression pass; the group (its topic, its
period and its events, oldest first) follows in the user message. A failed call, or an answer
with no text, falls back to the sources' texts joined in order: a summary is always written,
and the group's events are never lost to a helper that is down.

A TIME_COMPRESS field (the shipped `user_profile.history`) is written by compression, never by
extraction: a line per summary of the event types its `filters.events` lists, within its
`filters.within`, oldest first, the newest `filters.last` (else FIELD_LINES) of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.events.compression import Merge
from memory.events.schema import Field

MAX_CHARS = 2000  # of a summary's text, from the helper or merged
FIELD_LINES = 60  # summaries a TIME_COMPRESS field shows when its filters set no `last`
LINE_CHARS = 400  # of each summary, in the field
SOURCE_CHARS = 600  # of each source's text, in the prompt

PREFIX = """You condense a user's memory. Below are records of what the user talked about with \
an assistant on one topic over one period, oldest first. Write one summary of them: the facts, \
decisions, numbers, names and dates that matter later, in a few plain sentences, in the \
records' language. Keep what later records changed as it ended up. No preamble, no list of \
the records, nothing the records do not say."""


@dataclass(frozen=True)
class Source:
    """A source event as the summary reads it."""

    type: str
    text: str
    at: datetime  # when it ended


def prompt(merge: Merge, sources: Sequence[Source]) -> list[dict[str, str]]:
    """The helper call's messages: the fixed prefix, then the group."""
    return [{"role": "system", "content": PREFIX},
            {"role": "user", "content": render_group(merge, sources)}]


def render_group(merge: Merge, sources: Sequence[Source]) -> str:
    lines = [f"Topic: {merge.topic}",
             f"Period: {merge.level}, {_day(merge.start)} to {_day(merge.end)} (exclusive)",
             "Records:"]
    for source in sources:
        text = " ".join(source.text.split())[:SOURCE_CHARS]
        lines.append(f"- [{source.at:%Y-%m-%d %H:%M}] {source.type}: {text}")
    return "\n".join(lines) + "\n"


def read_answer(answer: str) -> str | None:
    """The helper's summary, trimmed; None when it wrote nothing usable. A NUL, which Postgres
    refuses in text, is dropped rather than failing the summary's write."""
    text = answer.replace("\x00", "").strip()
    if text.startswith("```"):  # a fenced answer: the text inside the fence
        text = text.strip("`").removeprefix("text").strip()
    return text[:MAX_CHARS] if text else None


def merged_text(merge: Merge, sources: Sequence[Source]) -> str:
    """The fallback: the sources' texts in order, each once, under the topic and period."""
    seen: list[str] = []
    for source in sources:
        text = " ".join(source.text.split())
        if text and text not in seen:
            seen.append(text)
    head = f"{merge.topic}, {merge.level} from {_day(merge.start)}: "
    body = "; ".join(seen)
    whole = head + body
    return whole if len(whole) <= MAX_CHARS else whole[:MAX_CHARS - 1] + "…"


def _day(at: datetime) -> str:
    return at.strftime("%Y-%m-%d")


@dataclass(frozen=True)
class Summarised:
    """A summary event, as a TIME_COMPRESS field reads it."""

    id: str
    topic: str
    level: str
    start: datetime  # its period's
    text: str
    types: tuple[str, ...]  # its sources' event types
    ended_at: datetime


def compressed_field(field: Field, summaries: Sequence[Summarised],
                     now: datetime) -> tuple[str, list[str]]:
    """The field's text and the summaries it shows (their ids)."""
    window = field.aggregate.filters
    chosen = sorted((s for s in summaries if set(s.types) & set(window.events)
                     and (window.within is None or now - s.ended_at <= window.within)),
                    key=lambda s: (s.start, s.topic, s.id))
    chosen = chosen[-(window.last or FIELD_LINES):]
    lines = [f"- {_day(s.start)} ({s.level}) {s.topic}: {' '.join(s.text.split())[:LINE_CHARS]}"
             for s in chosen]
    return "\n".join(lines), [s.id for s in chosen]

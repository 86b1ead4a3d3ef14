"""A summary event's text: the helper's, asked with a byte-stable prefix, or a merge of the
sources' own texts when the helper cannot answer (pure).

One helper call per group of events. The system message is the same bytes for every group, so
the model server's prefix cache stays warm across a compression pass; the group (its topic, its
period and its events, oldest first) follows in the user message. A failed call, or an answer
with no text, falls back to the sources' texts joined in order: a summary is always written,
and the group's events are never lost to a helper that is down.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.events.compression import Merge

MAX_CHARS = 2000  # of a summary's text, from the helper or merged
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
    """The helper's summary, trimmed; None when it wrote nothing usable."""
    text = answer.strip().strip("`").strip()
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

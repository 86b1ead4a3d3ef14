"""The keywords an event holds: the nodes of recall's keyword graph (migration 0020,
memory/event_recall.py).

An event's keywords are the short phrases it is about, as the extraction wrote them: its topic,
each short free-text property (a profile fact's `attribute`, "nickname"; a preference's
`subject`; a task's name) and each word of a list property (a discussion's `keywords`). A
property with a fixed set of values (`stance: likes`) says nothing of what the event is about,
and a long one (a note, a summary) is a sentence, not a keyword: neither is one. Phrases are
lower-cased with their spaces collapsed, so "Home City" and "home  city" are one node.
"""

from __future__ import annotations

import re
from typing import Any

from memory.events.schema import EventType

MAX_WORDS = 4  # a longer free-text value is a sentence
MAX_CHARS = 60
MAX_KEYWORDS = 12  # an event's; the rest would be noise in the graph

_PUNCTUATION = re.compile(r"[^\w\s'’-]+")


def event_keywords(topic: str, properties: dict[str, Any],
                   event_type: EventType | None) -> list[str]:
    """The event's keywords, first seen first, without repeats."""
    fixed = {p.name for p in event_type.properties if p.values} if event_type else set()
    found = [topic]
    for name, value in properties.items():
        if name in fixed:
            continue
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            found.extend(v for v in value if isinstance(v, str))
    out: list[str] = []
    for phrase in found:
        keyword = " ".join(_PUNCTUATION.sub(" ", phrase.lower()).split())
        if keyword and len(keyword.split()) <= MAX_WORDS and len(keyword) <= MAX_CHARS \
                and keyword not in out:
            out.append(keyword)
    return out[:MAX_KEYWORDS]

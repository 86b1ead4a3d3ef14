"""What one extraction pass reads and gives back (frozen dataclasses; no I/O)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from memory.events.schema import Op


@dataclass(frozen=True)
class Turn:
    index: int  # the turn's place in its batch: segments and spans count by it
    role: Literal["user", "assistant"]
    text: str


@dataclass(frozen=True)
class Candidate:
    """An existing entity card the model may patch (the top ones by ANN: not chosen here)."""

    entity: str  # the entity type
    key: str | None  # its topic, for types grouped by topic
    text: str


@dataclass(frozen=True)
class Segment:
    start: int  # first and last turn, inclusive
    end: int
    topic: str


@dataclass(frozen=True)
class Topic:
    """One topic of a batch and every piece of it, adjacent or not, in order."""

    name: str
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Event:
    type: str
    topic: str
    spans: tuple[tuple[int, int], ...]  # the turns it came from: its topic's pieces
    properties: dict[str, Any] = field(hash=False)


@dataclass(frozen=True)
class Update:
    """One field of one entity card, changed as the field's `Op` says."""

    entity: str
    key: str | None  # the card's topic, or "@" and its assistant (segments.py); by user: None
    field: str
    op: Op
    value: Any  # a patch's text, a number to add, items to append, a new value
    sources: tuple[int, ...]  # indexes into Extraction.events: the events behind the change


@dataclass(frozen=True)
class Dropped:
    path: str  # where in the model's answer: "events[2].properties.due"
    reason: str  # a stable code: not_json, unknown_event_type, wrong_type, bad_patch, ...
    detail: str


@dataclass(frozen=True)
class Extraction:
    topics: tuple[Topic, ...]
    events: tuple[Event, ...]
    updates: tuple[Update, ...]
    dropped: tuple[Dropped, ...]

    @property
    def empty(self) -> bool:
        """Nothing kept: from a batch with content, a failure to count (OpenViking #4580)."""
        return not self.events and not self.updates

    def reasons(self) -> Counter[str]:
        """How many items were dropped, by reason."""
        return Counter(d.reason for d in self.dropped)

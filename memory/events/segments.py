"""Segmentation's answer, `(start, end)` pieces each with a topic, turned into topics.

A conversation comes back to a topic: recursion, then a game algorithm, then recursion again.
The pieces of one topic, adjacent or not, make one topic with all its spans, so they become one
event, not two (VikingMem's segmentation). Topics are the same when their names are, ignoring
case, punctuation and spacing; the first spelling seen names the topic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memory.events.types import Segment, Topic

_NOT_WORD = re.compile(r"[\W_]+")


def topic_key(name: str) -> str:
    """What makes two topic names the same topic."""
    return " ".join(_NOT_WORD.sub(" ", name.casefold()).split())


def assistant_key(name: str) -> str:
    """The key of a card grouped by user and assistant: "@" and the assistant's name ("@" alone
    for the deployment's one assistant). No topic key starts so: `topic_key` keeps no "@"."""
    return "@" + topic_key(name)


def merge_spans(spans: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted, with overlapping or touching spans joined: (0, 3), (4, 6) -> (0, 6)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def topics(segments: Iterable[Segment]) -> tuple[Topic, ...]:
    """One topic per distinct name, in order of first appearance, with every piece of it."""
    names: dict[str, str] = {}
    spans: dict[str, list[tuple[int, int]]] = {}
    for segment in segments:
        key = topic_key(segment.topic)
        names.setdefault(key, " ".join(segment.topic.split()))
        spans.setdefault(key, []).append((segment.start, segment.end))
    return tuple(Topic(names[k], merge_spans(spans[k])) for k in names)

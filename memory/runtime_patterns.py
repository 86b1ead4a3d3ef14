"""L2 pattern memory: behaviour seen over several L1 versions of one conversation. Pure.

Every few L1 versions the helper distils patterns (memory/pattern_prompt.py); this module
decides when it is asked and what its text is worth:

    decide          whether to distil now: at least `min_turns` turns since the last L2 version,
                    at least `min_versions` L1 versions in the window, and a key present in at
                    least `min_key_repeats` of them (JIN's rule; each figure configurable)
    parse_patterns  the helper's lines, one pattern a line; anything else is left out
    ground          each pattern's evidence checked against what the user literally wrote: a
                    quote that is no substring of a user message (or is over 100 characters)
                    goes, and a pattern left without evidence goes with it; the L1 versions it
                    was first and last seen in follow from where its quotes were said
    merge           the new patterns folded into the previous ones: the same pattern again
                    widens its span and counts the new messages it was seen in
    is_stale        an L1 update that changed no line (the alert `stale_l1`)
    render          the patterns for the brain's prompt, within a token budget

The helper is trusted with words only: the versions, the occurrences and (when it gives none
or a wrong one) the confidence are counted here from the user's own messages.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, Literal

from memory.runtime_state import State, normalize_key

PATTERN_TYPES = ("repetition", "topic_shift", "stress_test", "contradiction",
                 "corrected_assumption")
Confidence = Literal["low", "medium", "high"]
CONFIDENCES: tuple[Confidence, ...] = ("low", "medium", "high")
MAX_QUOTE_CHARS = 100
MAX_DESCRIPTION_CHARS = 300
MAX_EVIDENCE = 5  # quotes kept per pattern, the newest
STALE_L1 = "stale_l1"
_QUOTE = re.compile(r"\"([^\"\n]*)\"|“([^”\n]*)”")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_NONE = frozenset({"none", "(none)", "no patterns", "-"})


class PatternsRejected(Exception):
    """The helper's text cannot stand as patterns; no L2 version is written and the next step
    asks again. `reason` is truncated (finish_reason `length`) or no_patterns (neither a
    pattern line nor `none`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class TriggerConfig:
    min_turns: int = 3  # finished turns since the last L2 version
    min_versions: int = 5  # L1 versions in the window
    min_key_repeats: int = 3  # versions of the window one key must be in


@dataclass(frozen=True)
class L1Sample:
    """An L1 version as L2 reads it: its number, the last answer it reflects, its state, and
    what wrote it (`update` for the helper's rewrite)."""

    version: int
    through_position: int | None
    state: State
    source: str = "update"


@dataclass(frozen=True)
class Said:
    """A user message of the window: the position of its turn's answer, and its text."""

    position: int
    text: str


@dataclass(frozen=True)
class Decision:
    fire: bool
    reason: str  # why (not): for the log


def decide(config: TriggerConfig, turns_since: int, window: Sequence[L1Sample]) -> Decision:
    """Whether the helper distils patterns now (all three conditions hold)."""
    if turns_since < config.min_turns:
        return Decision(False, f"{turns_since} turns since the last L2, under {config.min_turns}")
    if len(window) < config.min_versions:
        return Decision(False, f"{len(window)} L1 versions, under {config.min_versions}")
    counts: dict[str, int] = {}
    for snapshot in window:
        for key in {line.key for line in snapshot.state.lines}:
            counts[key] = counts.get(key, 0) + 1
    key, most = max(counts.items(), key=lambda kv: kv[1], default=("", 0))
    if most < config.min_key_repeats:
        return Decision(False, f"no key in {config.min_key_repeats} L1 versions")
    return Decision(True, f"{turns_since} turns, {len(window)} L1 versions, {key!r} in {most}")


@dataclass(frozen=True)
class Proposed:
    """A pattern line as the helper wrote it, not yet checked."""

    type: str
    confidence: Confidence | None
    description: str
    quotes: tuple[str, ...]


def parse_patterns(text: str, finish_reason: str | None) -> list[Proposed]:
    """The helper's pattern lines, `type | confidence | description | "quote"; "quote"`. A line
    of an unknown type or without a description is left out; `none` alone is no pattern."""
    if finish_reason == "length":
        raise PatternsRejected("truncated")
    found: list[Proposed] = []
    said_none = False
    for raw in text.splitlines():
        line = _BULLET.sub("", raw).strip()
        if line.lower().rstrip(".") in _NONE:
            said_none = True
            continue
        parts = [p.strip() for p in line.split("|", 3)]
        if len(parts) < 3:
            continue
        kind = normalize_key(parts[0])
        if kind not in PATTERN_TYPES or not parts[2]:
            continue
        level = parts[1].lower()
        confidence = next((c for c in CONFIDENCES if c == level), None)
        quotes = tuple(a or b for a, b in _QUOTE.findall(parts[3])) if len(parts) > 3 else ()
        description = parts[2]
        if len(description) > MAX_DESCRIPTION_CHARS:
            description = description[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
        found.append(Proposed(kind, confidence, description, quotes))
    if not found and not said_none:
        raise PatternsRejected("no_patterns")
    return found


@dataclass(frozen=True)
class Pattern:
    """One L2 entry. `positions` are the user messages (their turns' answer positions) its
    evidence was found in: occurrences is how many, and a window read again counts none twice."""

    type: str
    description: str
    evidence: tuple[str, ...]
    first_seen: int  # L1 versions
    last_seen: int
    occurrences: int
    confidence: Confidence
    positions: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "description": self.description,
                "evidence": list(self.evidence), "first_seen": self.first_seen,
                "last_seen": self.last_seen, "occurrences": self.occurrences,
                "confidence": self.confidence, "positions": list(self.positions)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Pattern:
        level = str(data.get("confidence"))
        return cls(str(data["type"]), str(data["description"]),
                   tuple(str(q) for q in data.get("evidence", [])), int(data["first_seen"]),
                   int(data["last_seen"]), int(data["occurrences"]),
                   next((c for c in CONFIDENCES if c == level), "low"),
                   tuple(int(p) for p in data.get("positions", [])))


def patterns_json(patterns: Sequence[Pattern]) -> list[dict[str, Any]]:
    return [p.to_json() for p in patterns]


def patterns_from_json(data: Sequence[dict[str, Any]] | None) -> tuple[Pattern, ...]:
    return tuple(Pattern.from_json(d) for d in data or [])


def version_of(position: int, window: Sequence[L1Sample]) -> int:
    """The first L1 version of the window that reflects the turn at `position` (the newest,
    for a turn no version reflects yet)."""
    for snapshot in sorted(window, key=lambda s: s.version):
        if snapshot.through_position is not None and snapshot.through_position >= position:
            return snapshot.version
    return max((s.version for s in window), default=0)


def _by_occurrences(occurrences: int) -> Confidence:
    return "high" if occurrences >= 3 else "medium" if occurrences == 2 else "low"


def ground(proposed: Sequence[Proposed], said: Sequence[Said],
           window: Sequence[L1Sample]) -> list[Pattern]:
    """Each proposed pattern with only the quotes the user literally wrote (at most 100
    characters each); one left with none is dropped. Its versions and occurrences come from the
    messages its quotes are in."""
    grounded: list[Pattern] = []
    for p in proposed:
        quotes: list[str] = []
        positions: set[int] = set()
        for quote in p.quotes:
            quote = quote.strip()
            if not quote or len(quote) > MAX_QUOTE_CHARS or quote in quotes:
                continue
            # (The helper reads each message on one line: a quote across a line break is the
            # user's text with its spacing folded.)
            where = {s.position for s in said if quote in s.text or quote in _flat(s.text)}
            if where:
                quotes.append(quote)
                positions |= where
        if not quotes:
            continue
        versions = [version_of(pos, window) for pos in positions]
        grounded.append(Pattern(
            p.type, p.description, tuple(quotes[-MAX_EVIDENCE:]), min(versions), max(versions),
            len(positions), p.confidence or _by_occurrences(len(positions)),
            tuple(sorted(positions))))
    return grounded


def _flat(message: str) -> str:
    return " ".join(message.split())


def _similar(a: str, b: str) -> float:
    return SequenceMatcher(None, a.lower(), b.lower()).ratio()


def _same(old: Pattern, new: Pattern, threshold: float) -> bool:
    return old.type == new.type and (
        bool(set(old.evidence) & set(new.evidence))
        or _similar(old.description, new.description) >= threshold)


def merge(previous: Sequence[Pattern], new: Sequence[Pattern], threshold: float = 0.6,
          limit: int = 20) -> tuple[Pattern, ...]:
    """The patterns after a distillation: a new one that is a previous one again (its type,
    and a shared quote or a like description) widens it, with the new description and
    confidence; the previous ones not seen again stay; the `limit` seen last are kept."""
    merged = list(previous)
    for pattern in new:
        at = next((i for i, old in enumerate(merged) if _same(old, pattern, threshold)), None)
        if at is None:
            merged.append(pattern)
            continue
        old = merged[at]
        positions = tuple(sorted(set(old.positions) | set(pattern.positions)))
        evidence = tuple(dict.fromkeys(old.evidence + pattern.evidence))[-MAX_EVIDENCE:]
        merged[at] = Pattern(pattern.type, pattern.description, evidence,
                             min(old.first_seen, pattern.first_seen),
                             max(old.last_seen, pattern.last_seen),
                             max(len(positions), old.occurrences), pattern.confidence, positions)
    newest = sorted(merged, key=lambda p: -p.last_seen)[:limit]
    return tuple(p for p in merged if p in newest)


def is_stale(previous: State, current: State) -> bool:
    """True when an update left every line as it was (its key, value and durable mark): the
    helper wrote nothing new although the user did."""
    def lines(state: State) -> set[tuple[str, str, bool]]:
        return {(line.key, line.value, line.durable) for line in state.lines}

    return lines(previous) == lines(current)


def pattern_text(pattern: Pattern) -> str:
    seen = (f"v{pattern.first_seen}" if pattern.first_seen == pattern.last_seen
            else f"v{pattern.first_seen}-v{pattern.last_seen}")
    quotes = "; ".join(f'"{q}"' for q in pattern.evidence)
    return (f"{pattern.type} ({pattern.confidence}, {pattern.occurrences}x, {seen}): "
            f"{pattern.description} | user said: {quotes}")


_RANK = {"high": 0, "medium": 1, "low": 2}


def render(patterns: Sequence[Pattern], budget_tokens: int, count: Callable[[str], int]) -> str:
    """The patterns for the brain's prompt, one a line, the most confident and the latest
    first, within `budget_tokens`; what does not fit is left out."""
    ordered = sorted(patterns, key=lambda p: (_RANK[p.confidence], -p.last_seen))
    chosen: list[str] = []
    used = 0
    for pattern in ordered:
        line = pattern_text(pattern)
        cost = count(line) + 1
        if used + cost > budget_tokens:
            continue
        chosen.append(line)
        used += cost
    return "\n".join(chosen)

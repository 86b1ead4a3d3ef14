"""L1 runtime memory: the compact `key: value` state of one conversation. Pure.

After each completed turn the helper rewrites the state from the previous one and the turn
(memory/runtime_prompt.py); this module decides what its text is worth:

    parse_update   the helper's text as lines, or UpdateRejected (truncated or malformed)
    merge          the new state: each line's strength, durable lines kept, weak ones dropped,
                   tombstones (lines the user deleted) respected
    mark_unresolved / delete / set_durable   the versions that need no helper
    diff           each line against the previous version: new / changed / same, removed keys
    render         the state as text, strongest lines first, within a token budget

A line's strength decays by `decay` with each rewrite; a line the rewrite keeps gains `presence`
plus `change_boost` x how much it changed (a matched line: decay x old + presence + boost x
change); a new key starts at `new_key`. A line the rewrite leaves out only decays, and falls out
once under `floor`. A durable line (the helper writes `!key: value`, or the user marks it through
the API) never goes under `durable_floor` and is never dropped by a rewrite; only the user
deletes it. Keys are matched fuzzily (by edit similarity), so `user_city` and `users_city` are
one line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from typing import Any, Literal

# The key of the line jin itself writes when a turn did not finish; the helper cannot write it.
UNRESOLVED_KEY = "unresolved_turn"
DURABLE_MARK = "!"
_DANGLING = (",", ":", "(", "[", "{")
_PAIRS = {")": "(", "]": "[", "}": "{"}
# A line the helper writes: `key: value`, the key one to 64 letters, digits, `_`, `-` or spaces,
# after an optional durable mark. A JSON member ("key": 1), a heading or a bullet is no such line.
_LINE = re.compile(r"^(!?)\s*([A-Za-z][A-Za-z0-9_\- ]{0,63})\s*:\s*(.*\S)\s*$")
_NOT_KEY = re.compile(r"[^a-z0-9]+")
_PLACEHOLDERS = frozenset({"", "none", "n/a", "na", "null", "nil", "unknown", "-"})
MAX_VALUE_CHARS = 400

Status = Literal["new", "changed", "same"]


class UpdateRejected(Exception):
    """The helper's text cannot stand as the state; the previous state stays. `reason` is one of
    truncated (finish_reason `length`), dangling_end (ends in , : ( [ or {), unbalanced
    (brackets), no_lines (no `key: value` line)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class StrengthConfig:
    decay: float = 0.82
    presence: float = 0.08
    change_boost: float = 0.8
    new_key: float = 0.5
    floor: float = 0.2  # under it (after a rewrite) a line that is not durable falls out
    durable_floor: float = 0.25
    key_match: float = 0.58  # edit similarity at which two keys are one line
    tombstone_match: float = 0.6  # value similarity at which a deleted line counts as back


@dataclass(frozen=True)
class Parsed:
    key: str
    value: str
    durable: bool = False


@dataclass(frozen=True)
class Line:
    key: str
    value: str
    strength: float
    durable: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "strength": self.strength,
                "durable": self.durable}


@dataclass(frozen=True)
class Tombstone:
    """A line the user deleted: the helper may not bring it back (its key with a like value)."""

    key: str
    value: str


@dataclass(frozen=True)
class State:
    lines: tuple[Line, ...] = ()
    tombstones: tuple[Tombstone, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"lines": [line.to_json() for line in self.lines],
                "tombstones": [{"key": t.key, "value": t.value} for t in self.tombstones]}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> State:
        data = data or {}
        return cls(
            tuple(Line(str(d["key"]), str(d["value"]), float(d["strength"]),
                       bool(d.get("durable", False))) for d in data.get("lines", [])),
            tuple(Tombstone(str(d["key"]), str(d["value"])) for d in data.get("tombstones", [])),
        )

    def line(self, key: str) -> Line | None:
        return next((line for line in self.lines if line.key == key), None)


def normalize_key(raw: str) -> str:
    """`User City` -> `user_city`: lowercase words joined by underscores."""
    return _NOT_KEY.sub("_", raw.lower()).strip("_")


def similarity(a: str, b: str) -> float:
    if a == b:
        return 1.0
    return SequenceMatcher(None, a.lower(), b.lower()).ratio()


def parse_update(text: str, finish_reason: str | None) -> list[Parsed]:
    """The lines of the helper's new state. Raises UpdateRejected for a text cut off by the
    length limit, one that ends mid-thought or with unbalanced brackets, or one without a
    `key: value` line. Other lines (headings, bullets, prose) are left out."""
    if finish_reason == "length":
        raise UpdateRejected("truncated", "the helper hit its token limit")
    body = text.strip()
    if body.endswith(_DANGLING):
        raise UpdateRejected("dangling_end", f"the text ends in {body[-1]!r}")
    if not _balanced(body):
        raise UpdateRejected("unbalanced", "its brackets do not pair up")
    lines: dict[str, Parsed] = {}
    for raw in body.splitlines():
        match = _LINE.match(raw.strip())
        if match is None:
            continue
        key, value = normalize_key(match.group(2)), match.group(3).strip()
        if not key or key == UNRESOLVED_KEY or value.lower() in _PLACEHOLDERS:
            continue
        if len(value) > MAX_VALUE_CHARS:
            value = value[: MAX_VALUE_CHARS - 1].rstrip() + "…"
        lines.pop(key, None)  # a key written twice: the later line, in its place
        lines[key] = Parsed(key, value, durable=match.group(1) == DURABLE_MARK)
    if not lines:
        raise UpdateRejected("no_lines", "no `key: value` line")
    return list(lines.values())


def _balanced(text: str) -> bool:
    stack: list[str] = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS:
            if not stack or stack.pop() != _PAIRS[ch]:
                return False
    return not stack


def match_keys(
    previous: Sequence[tuple[str, str]], current: Sequence[tuple[str, str]], threshold: float
) -> dict[int, int]:
    """Which previous line each current line is, as {current index: previous index}: the same
    key first, then the most similar unclaimed key at or over `threshold`."""
    matched: dict[int, int] = {}
    by_key = {key: i for i, (key, _) in enumerate(previous)}
    for i, (key, _) in enumerate(current):
        if key in by_key:
            matched[i] = by_key[key]
    taken = set(matched.values())
    for i, (key, _) in enumerate(current):
        if i in matched:
            continue
        best, best_score = None, threshold
        for j, (old, _) in enumerate(previous):
            if j not in taken and (score := similarity(key, old)) >= best_score:
                best, best_score = j, score
        if best is not None:
            matched[i] = best
            taken.add(best)
    return matched


def change_ratio(old: str, new: str) -> float:
    return round(1.0 - similarity(old, new), 4)


def _clamp(strength: float, durable: bool, config: StrengthConfig) -> float:
    low = config.durable_floor if durable else 0.0
    return round(min(1.0, max(low, strength)), 4)


def _blocked(parsed: Parsed, tombstones: Sequence[Tombstone], config: StrengthConfig) -> bool:
    return any(similarity(parsed.key, t.key) >= config.key_match
               and similarity(parsed.value, t.value) >= config.tombstone_match
               for t in tombstones)


def merge(previous: State, update: list[Parsed], config: StrengthConfig) -> State:
    """The state after a rewrite: each new line matched to a previous one (fuzzily, by key),
    strengths moved, the lines the rewrite left out decayed or dropped, deleted lines kept out.
    The unresolved-turn line goes: the rewrite covers a turn that finished since."""
    old = [line for line in previous.lines if line.key != UNRESOLVED_KEY]
    kept = [p for p in update if not _blocked(p, previous.tombstones, config)]
    # A key written anew with another value than the deleted one is a new fact: its tombstone
    # has done its work.
    tombstones = tuple(t for t in previous.tombstones
                       if not any(similarity(p.key, t.key) >= config.key_match for p in kept))
    matched = match_keys([(line.key, line.value) for line in old],
                         [(p.key, p.value) for p in kept], config.key_match)
    lines: list[Line] = []
    for i, parsed in enumerate(kept):
        if i not in matched:
            durable = parsed.durable
            lines.append(Line(parsed.key, parsed.value,
                              _clamp(config.new_key, durable, config), durable))
            continue
        before = old[matched[i]]
        durable = before.durable or parsed.durable
        change = max(change_ratio(before.key, parsed.key), change_ratio(before.value,
                                                                         parsed.value))
        strength = before.strength * config.decay + config.presence + change * config.change_boost
        lines.append(Line(parsed.key, parsed.value, _clamp(strength, durable, config), durable))
    carried = set(matched.values())
    for j, line in enumerate(old):
        if j in carried:
            continue
        strength = _clamp(line.strength * config.decay, line.durable, config)
        if line.durable or strength >= config.floor:
            lines.append(replace(line, strength=strength))
    return State(tuple(lines), tombstones)


def mark_unresolved(state: State, reason: str, user_text: str) -> State:
    """The state with a line saying the last turn did not finish (no helper; no decay)."""
    asked = " ".join(user_text.split())
    if len(asked) > 160:
        asked = asked[:159].rstrip() + "…"
    value = f"the last turn did not finish ({reason}); the user had asked: {asked}"
    others = tuple(line for line in state.lines if line.key != UNRESOLVED_KEY)
    return replace(state, lines=(Line(UNRESOLVED_KEY, value, 1.0), *others))


def delete(state: State, key: str | None = None) -> State:
    """The state without the line `key` (without every line when None), each remembered as a
    tombstone so that a rewrite does not bring it back."""
    gone = [line for line in state.lines if key is None or line.key == key]
    stones = {(t.key, t.value): t for t in state.tombstones}
    for line in gone:
        if line.key != UNRESOLVED_KEY:
            stones[(line.key, line.value)] = Tombstone(line.key, line.value)
    return State(tuple(line for line in state.lines if line not in gone),
                 tuple(stones.values())[-200:])


def set_durable(state: State, key: str, durable: bool, config: StrengthConfig) -> State:
    return replace(state, lines=tuple(
        replace(line, durable=durable, strength=_clamp(line.strength, durable, config))
        if line.key == key else line for line in state.lines))


@dataclass(frozen=True)
class Diff:
    lines: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"lines": self.lines, "removed": self.removed}


def diff(previous: State | None, current: State, key_match: float = 0.58) -> Diff:
    """Each line of `current` against `previous`: key_status and value_status (new, changed,
    same), the change ratio (0 same .. 1 all new) and the previous key it was matched to; and
    the previous lines no current line matches."""
    old = list(previous.lines) if previous is not None else []
    new = list(current.lines)
    matched = match_keys([(x.key, x.value) for x in old], [(x.key, x.value) for x in new],
                         key_match)
    lines = []
    for i, line in enumerate(new):
        entry = line.to_json()
        if i not in matched:
            entry.update(key_status="new", value_status="new", change_ratio=1.0,
                         previous_key=None)
        else:
            before = old[matched[i]]
            key_change, value_change = (change_ratio(before.key, line.key),
                                        change_ratio(before.value, line.value))
            entry.update(key_status=_status(key_change), value_status=_status(value_change),
                         change_ratio=max(key_change, value_change), previous_key=before.key)
        lines.append(entry)
    taken = set(matched.values())
    removed = [{"key": x.key, "value": x.value} for j, x in enumerate(old) if j not in taken]
    return Diff(lines, removed)


def _status(change: float) -> Status:
    return "changed" if change > 0 else "same"


def text(state: State, marks: bool = True) -> str:
    """The state as `key: value` lines, durable ones marked `!` when `marks`."""
    return "\n".join(_line_text(line, marks) for line in state.lines)


def _line_text(line: Line, marks: bool) -> str:
    mark = DURABLE_MARK if marks and line.durable else ""
    return f"{mark}{line.key}: {line.value}"


def render(state: State, budget_tokens: int, count: Callable[[str], int]) -> str:
    """The state for the brain's prompt, within `budget_tokens`: the unresolved-turn line first,
    then durable lines, then the rest by strength; what does not fit is left out."""
    ordered = sorted(state.lines, key=lambda x: (x.key != UNRESOLVED_KEY, not x.durable,
                                                  -x.strength))
    chosen: list[str] = []
    used = 0
    for line in ordered:
        cost = count(_line_text(line, marks=False)) + 1
        if used + cost > budget_tokens:
            continue
        chosen.append(_line_text(line, marks=False))
        used += cost
    return "\n".join(chosen)

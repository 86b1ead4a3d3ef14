"""Entity text changed by SEARCH/REPLACE blocks, as the helper model writes them.

    <<<<<<< SEARCH
    :start_line: 12          (optional: the line the search starts on)
    -------                  (optional)
    - Lives in Kyiv
    =======
    - Lives in Lviv since May
    >>>>>>> REPLACE

Every block of a patch applies, in order, each to the text the one before left; a patch whose
block cannot apply is refused whole, naming the block and why, and the text stays as it was (a
half-applied patch is a card the model never meant). An empty SEARCH appends its REPLACE to the
end, so a new entity written as several blocks keeps every one of them (OpenViking PR #3682: a
new memory kept only its first block). Text outside the blocks is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from memory.events.matcher import How, MatchConfig, NotFound, locate

SEARCH, SPLIT, REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
_MARKERS = (SEARCH, SPLIT, REPLACE)
_HINT = re.compile(r"^:start_line:\s*(\d+)\s*$")
_NUMBERED = re.compile(r"^\s*(\d+)\s*\|\s?")


@dataclass(frozen=True)
class Block:
    search: str
    replace: str
    line: int | None = None  # the model's hint: the 1-based line the search starts on


@dataclass(frozen=True)
class Change:
    block: int  # 0-based, in the patch's order
    how: How | Literal["appended"]
    line: int  # 1-based line of the text as it was when this block applied
    score: float = 1.0


@dataclass(frozen=True)
class Applied:
    text: str
    changes: tuple[Change, ...]
    type: Literal["applied"] = "applied"


@dataclass(frozen=True)
class Refused:
    reason: Literal["unparseable", "missing", "ambiguous", "too_costly"]
    detail: str
    block: int | None = None  # the block that failed; None when the patch did not parse
    type: Literal["refused"] = "refused"


@dataclass
class _Open:
    search: list[str] = field(default_factory=list)
    replace: list[str] = field(default_factory=list)
    line: int | None = None
    in_replace: bool = False


def parse_patch(patch: str) -> list[Block] | Refused:
    """The blocks of a patch, in order, or why it cannot be read."""
    blocks: list[Block] = []
    current: _Open | None = None
    for number, raw in enumerate(patch.replace("\r\n", "\n").split("\n"), start=1):
        line = raw.rstrip()
        if line == SEARCH:
            if current is not None:
                return Refused("unparseable", f"line {number}: a SEARCH opens inside a block "
                               f"(block {len(blocks) + 1} has no {REPLACE!r})")
            current = _Open()
        elif current is None:
            if line in (SPLIT, REPLACE):
                return Refused("unparseable", f"line {number}: {line!r} outside a block")
        elif line == SPLIT:
            if current.in_replace:
                return Refused("unparseable", f"line {number}: a second {SPLIT!r} in one block")
            current.in_replace = True
        elif line == REPLACE:
            if not current.in_replace:
                return Refused("unparseable", f"line {number}: {REPLACE!r} before {SPLIT!r}")
            blocks.append(_closed(current))
            current = None
        elif current.in_replace:
            current.replace.append(_unescaped(raw))
        elif not current.search and current.line is None and _HINT.match(line):
            current.line = int(_HINT.match(line).group(1))  # type: ignore[union-attr]
        elif not current.search and line == "-------":
            continue
        else:
            current.search.append(_unescaped(raw))
    if current is not None:
        return Refused("unparseable", f"block {len(blocks) + 1} is not closed by {REPLACE!r}")
    if not blocks:
        return Refused("unparseable", f"no {SEARCH!r} ... {REPLACE!r} block in the patch")
    return blocks


def apply_patch(text: str, patch: str, config: MatchConfig | None = None) -> Applied | Refused:
    """The text with every block of the patch applied in order, or why the patch is refused."""
    blocks = parse_patch(patch)
    if isinstance(blocks, Refused):
        return blocks
    return apply_blocks(text, blocks, config or MatchConfig())


def apply_blocks(text: str, blocks: list[Block], config: MatchConfig) -> Applied | Refused:
    changes: list[Change] = []
    shifts: list[tuple[int, int]] = []  # (line where a block applied, lines it added)
    for index, block in enumerate(blocks):
        if not block.search.strip():
            sep = "" if not text or text.endswith("\n") else "\n"
            line = text.count("\n") + 1 + len(sep)
            text = f"{text}{sep}{block.replace}"
            changes.append(Change(index, "appended", line))
            continue
        # The hint counted lines of the text the model saw: move it past earlier blocks' edits.
        hint = block.line
        if hint is not None:
            for at, added in shifts:  # each counted in the text as it was then: move in turn
                if at < hint:
                    hint += added
        found = locate(text, block.search, hint, config)
        if isinstance(found, NotFound):
            return Refused(found.reason, f"block {index + 1}: {found.detail}", index)
        start, end, replace = found.start, found.end, block.replace
        whole = (start == 0 or text[start - 1] == "\n") and (end == len(text) or text[end] == "\n")
        if whole and replace == "" and end < len(text):
            end += 1  # deleting whole lines removes their line break too
        elif whole and replace == "" and start > 0:
            start -= 1  # the last lines: the break before them
        shifts.append((found.line, replace.count("\n") - text.count("\n", start, end)))
        text = text[:start] + replace + text[end:]
        changes.append(Change(index, found.how, found.line, found.score))
    return Applied(text=text, changes=tuple(changes))


def _closed(block: _Open) -> Block:
    search, replace = block.search, block.replace
    # Lines copied with the prompt's "12| " numbers: drop them, the first is the hint.
    numbered = [_NUMBERED.match(s) for s in search if s.strip()]
    if numbered and all(numbered):
        hint = block.line or int(numbered[0].group(1))  # type: ignore[union-attr]
        search = [_NUMBERED.sub("", s, count=1) for s in search]
        if all(_NUMBERED.match(r) for r in replace if r.strip()):
            replace = [_NUMBERED.sub("", r, count=1) for r in replace]
        return Block("\n".join(search), "\n".join(replace), hint)
    return Block("\n".join(search), "\n".join(replace), block.line)


def _unescaped(line: str) -> str:
    """A content line that is a marker is written with a backslash before it."""
    return line[1:] if line.startswith("\\") and line[1:].rstrip() in _MARKERS else line

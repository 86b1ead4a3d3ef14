"""Verifying a summary without a model: the checkable items of a span must survive. Pure.

Items are numbers, dates, URLs, e-mail addresses, identifiers, quoted strings, names and open
questions. An item is covered when its text appears (case-insensitively, spacing ignored) in the
summary or in the durable facts written for the span. Lines holding uncovered items are kept
verbatim in the summary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

URL = re.compile(r"https?://[^\s<>\"')\]]+")
EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|"
    r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.? \d{1,2}(?:, \d{4})?\b"
)
QUOTED = re.compile(r"\"([^\"\n]{2,80})\"|“([^”\n]{2,80})”")
IDENTIFIER = re.compile(
    r"\b[A-Za-z]+[-_][A-Za-z0-9_-]*\d[A-Za-z0-9_-]*\b"  # ABC-123, build_42
    r"|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b"  # camelCase
    r"|\b[a-z0-9]+(?:_[a-z0-9]+)+\b"  # snake_case
    r"|\b[0-9a-f]{8,}\b"  # hashes, ids
)
NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?(?:\s?%)?(?![\w.])")
NAME = re.compile(r"(?<=[a-z,;:] )[A-Z][a-z]+(?: [A-Z][a-z]+)*")
# A question is a sentence ending in "?". It starts where a sentence can (the start, or after
# . ! ? or a newline): tried at every position, `[^.!?\n]*\?` rescanned each sentence to its end
# from each of its characters, quadratic in its length (13 ms of a pass's 17 over a span of
# 19,000 characters without questions). The same matches, in one scan.
QUESTION = re.compile(r"(?:^|(?<=[.!?\n]))[^.!?\n]*\?")

_ANY = re.compile("|".join(f"(?:{p.pattern})" for p in (
    URL, EMAIL, DATE, QUOTED, IDENTIFIER, NUMBER, NAME, QUESTION)))


def may_hold_items(text: str) -> bool:
    """A cheap test, never false when extract() would find an item: one search of one pattern."""
    return _ANY.search(text) is not None


@dataclass(frozen=True)
class Item:
    kind: str
    text: str
    line: str  # the line it came from, kept verbatim if the item is lost


@dataclass(frozen=True)
class Report:
    total: int
    covered: int
    missing: list[Item] = field(default_factory=list)

    @property
    def coverage(self) -> float:
        return 1.0 if self.total == 0 else self.covered / self.total

    def as_json(self) -> dict[str, object]:
        return {
            "items": self.total,
            "covered": self.covered,
            "coverage": round(self.coverage, 4),
            "missing": [{"kind": i.kind, "text": i.text} for i in self.missing[:50]],
        }


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


# Each kind, in the order they claim text, with what a line must hold for it to match at all
# (a cheap search first: most lines of a span hold no URL, e-mail, quote or question).
_DIGIT = re.compile(r"\d")
# A date has a digit before - or /, or a month's name; an identifier a - or _, a lower case
# letter before a capital, or eight hex digits in a row.
_DATE_HINT = re.compile(r"\d[-/]|Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec")
_IDENTIFIER_HINT = re.compile(r"[-_]|[a-z][A-Z]|[0-9a-f]{8}")
_KINDS = (
    ("url", URL, re.compile("https?://")), ("email", EMAIL, re.compile("@")),
    ("date", DATE, _DATE_HINT), ("quoted", QUOTED, re.compile("[\"“]")),
    ("identifier", IDENTIFIER, _IDENTIFIER_HINT), ("number", NUMBER, _DIGIT),
    ("name", NAME, re.compile("[A-Z]")), ("question", QUESTION, re.compile(r"\?")),
)


def extract(text: str) -> list[Item]:
    """The checkable items of a text, each once, in order of appearance."""
    items: list[Item] = []
    seen: set[tuple[str, str]] = set()
    for line in text.splitlines():
        found = _remembered(line) if len(line) <= _REMEMBERED_CHARS else _line_items(line)
        for kind, value, key in found:
            if key not in seen:
                seen.add(key)
                items.append(Item(kind, value, line.strip()))
    return items


def _line_items(line: str) -> tuple[tuple[str, str, tuple[str, str]], ...]:
    """A line's items in order, each as (kind, text, the key it is told apart by)."""
    found: list[tuple[str, str, tuple[str, str]]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern, needs in _KINDS:
        if needs is not None and needs.search(line) is None:
            continue
        for match in pattern.finditer(line):
            start, end = match.span()
            if kind != "question" and any(s <= start < e for s, e in taken):
                continue  # inside a URL, an e-mail, a date... already taken
            value = next((g for g in match.groups() if g), None) or match.group(0)
            value = value.strip().rstrip(".,;:")
            if kind == "number" and len(value.strip("+-")) < 2:
                continue  # single digits are noise
            if kind == "question" and len(value.split()) < 3:
                continue
            taken.append((start, end))
            if value:
                found.append((kind, value, (kind, _norm(value))))
    return tuple(found)


# Each pass extracts the previous summary again, whose lines mostly stand as the pass before
# left them (the facts, the lines kept verbatim): ~40 us a line of a bench summary, remembered.
_REMEMBERED_CHARS = 1000
_remembered = lru_cache(maxsize=8192)(_line_items)


def verify(items: list[Item], summary: str, memory: list[str]) -> Report:
    haystack = _norm(summary + "\n" + "\n".join(memory))
    missing = [i for i in items if _norm(i.text) not in haystack]
    return Report(total=len(items), covered=len(items) - len(missing), missing=missing)


_LIST_ITEM = re.compile(r"[-*•]\s")  # (a numbered line keeps its number as "- 12. ...")


def keep_missing(summary: str, report: Report) -> str:
    """The summary with every line that held a lost item appended verbatim."""
    lines: list[str] = []
    for item in report.missing:
        if item.line not in lines:
            lines.append(item.line)
    if not lines:
        return summary
    # A line that is a list item already (a fact of the previous summary) stays as it was: as
    # "- - ..." it would be a new line to the next pass, kept again with one more marker, and
    # written to memory again as a new fact each time.
    kept = "\n".join(line if _LIST_ITEM.match(line) else f"- {line}" for line in lines)
    return f"{summary.rstrip()}\n\n## Kept verbatim\n{kept}\n"

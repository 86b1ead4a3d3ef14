"""Fact text rules. Pure."""

from __future__ import annotations

import re
from functools import lru_cache

# A list marker and a space, and any further markers of a nested one ("- - x" is the fact "x";
# "-5 °C" and "1.5 kg" begin with a number, not a marker).
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])(?=\s)\s*(?:[-*•]\s+)*")


def normalize(fact: str) -> str:
    """The text two writes of the same fact share: no bullet, case or spacing differences."""
    text = _BULLET.sub("", fact).strip().rstrip(".;").lower()
    return " ".join(text.split())


def clean(fact: str) -> str:
    return _BULLET.sub("", fact).strip()


_TOKEN = re.compile(r"[^\W_][\w@./:'-]*", re.UNICODE)


def key_terms(fact: str) -> frozenset[str]:
    """What tells two similar facts apart: tokens with a digit (numbers, dates, codes) and
    capitalised words after the first (names). "Room 101 has code K7001" and "Room 102 has code
    K7002" embed almost alike, yet are two facts; "…is green." and "…is green!" are one."""
    if len(fact) > _REMEMBERED_CHARS:
        return _key_terms(fact)
    return _remembered(fact)


def _key_terms(fact: str) -> frozenset[str]:
    tokens = _TOKEN.findall(fact)
    # A word of letters only has no digit: isalpha() answers most tokens without a loop.
    terms = {t.lower().strip(".:'-") for t in tokens
             if not t.isalpha() and any(c.isdigit() for c in t)}
    terms |= {t.lower().strip(".:'-") for t in tokens[1:] if t[:1].isupper() and len(t) > 1}
    return frozenset(t for t in terms if t)


# A compaction pass compares each fact it writes with its nearest stored fact, mostly the same
# few rows pass after pass: the terms of a fact's length of text are remembered (a few MB).
_REMEMBERED_CHARS = 2000  # memory/store.py FactConfig.max_chars
_remembered = lru_cache(maxsize=4096)(_key_terms)

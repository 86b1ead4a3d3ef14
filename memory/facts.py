"""Fact text rules, and where a fact came from. Pure."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import TypeVar

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


Source = TypeVar("Source", bound=Hashable)

# A fact is drawn from the messages that hold at least DRAWN_COVER of its terms' weight and at
# least DRAWN_SHARE of the best one's score, at most DRAWN_MOST of them (bench/README.md, fact
# expansion).
DRAWN_COVER = 0.2
DRAWN_SHARE = 0.75
DRAWN_MOST = 3


def drawn_from(
    fact: frozenset[str], sources: Sequence[tuple[Source, frozenset[str]]]
) -> list[Source]:
    """Which of the messages a fact was written from say it: those holding the most of its
    terms (search lexemes), each term weighted by its rarity among these messages as BM25
    weighs it (a term none of them holds weighs the most). A memory flush reads a span of
    ~20-100 messages and draws a few facts from it; a fact names the one or two that said it,
    so that it can be their key in recall (memory/recall_store.py, expansion). A fact no
    message holds enough of ("Ana is learning the cello" for "my fingers ache after practice"
    shares at most a word) is drawn from all of them: the span is all that is known of where
    it came from."""
    n = len(sources)
    if n <= 1 or not fact:
        return [source for source, _ in sources]
    held = Counter(term for _, terms in sources for term in terms & fact)
    weight = {term: math.log(1 + (n - held[term] + 0.5) / (held[term] + 0.5)) for term in fact}
    scores = [sum(weight[t] for t in terms & fact) for _, terms in sources]
    best = max(scores)
    if best < DRAWN_COVER * sum(weight.values()):
        return [source for source, _ in sources]
    ranked = sorted(range(n), key=lambda i: -scores[i])  # (stable: the earlier of a tie first)
    kept = {i for i in ranked[:DRAWN_MOST] if scores[i] >= DRAWN_SHARE * best}
    return [source for i, (source, _) in enumerate(sources) if i in kept]

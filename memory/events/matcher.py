"""Where a SEARCH block sits in an entity's text: exact first, then approximate, bounded.

Four tiers, each tried only when the one before finds nothing:

1. the block's text as it is;
2. the same with typography normalised on both sides (smart quotes, guillemets, dashes,
   non-breaking spaces, zero-width characters, CR): models retype “ ” as " and drop U+200B;
3. whole lines equal once stripped of surrounding whitespace (indentation the model lost);
4. whole-line windows of the block's height scored by Levenshtein similarity (rapidfuzz, C),
   at or above `threshold`; optionally also with both sides' lines sorted, so that lines the
   model put in another order still find their place.

With a line hint, tier 4 reads only `buffer_lines` around it, from the hint outward; without
one, the whole text; either way within a `max_work` budget, so a miss costs a bounded
time whatever the entity's size (OpenViking #1972: pure-Python Levenshtein over every window of
a large memory pinned a core). Two places that fit equally well are refused, never guessed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

How = Literal["exact", "normalized", "lines", "approximate"]

_SAME = {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
         "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
         "\u00ab": '"', "\u00bb": '"', "\u2013": "-", "\u2014": "-", "\u2212": "-",
         "\u00a0": " ", "\u202f": " ", "\u2007": " ", "\u2009": " "}
_GONE = "\u200b\u200c\u200d\u200e\u200f\u2060\ufeff\u00ad\r"
# str.replace per character, not str.translate: on 100 KB of Cyrillic 1.4 ms against 12 ms.
_FOLDS = [*_SAME.items(), *((c, "") for c in _GONE)]


@dataclass(frozen=True)
class MatchConfig:
    threshold: float = 0.8  # Levenshtein similarity a window needs (1 - distance / longer)
    buffer_lines: int = 40  # lines either side of a hint that the approximate tier reads
    ambiguity_margin: float = 0.05  # a second place this close to the best makes it ambiguous
    reordered_lines: bool = True  # also score windows with both sides' lines sorted
    # The approximate tier's work for one block, in machine words of edit distance: the bound
    # on a miss's cost, whatever the entity's size (bench/patch_matcher.py: ~2 ms at 250,000).
    max_work: int = 250_000


@dataclass(frozen=True)
class Found:
    start: int  # character offsets in the text searched
    end: int
    line: int  # 1-based line where the match starts
    how: How
    score: float  # 1.0 unless approximate


@dataclass(frozen=True)
class NotFound:
    reason: Literal["missing", "ambiguous", "too_costly"]
    detail: str


def normalize(text: str) -> str:
    """The text as the matcher compares it: typography folded, invisible characters gone."""
    if text.isascii() and "\r" not in text:
        return text
    for odd, plain in _FOLDS:
        if odd in text:
            text = text.replace(odd, plain)
    return text


def locate(text: str, search: str, hint: int | None, config: MatchConfig) -> Found | NotFound:
    """Where `search` is in `text`, `hint` being the 1-based line the model said it starts on."""
    exact = _exact(text, search, hint, "exact")
    if isinstance(exact, Found):
        return exact
    norm_text, norm_search = normalize(text), normalize(search)
    if norm_text is not text or norm_search is not search:
        found = _exact(norm_text, norm_search, hint, "normalized")
        if isinstance(found, Found):
            # Offsets back into the real text: only deleted characters shift them.
            gone = sorted(i for c in _GONE for i in _positions(text, c))
            dropped = [at - k for k, at in enumerate(gone)]
            start = found.start + bisect_right(dropped, found.start)
            end = found.end - 1 + bisect_right(dropped, found.end - 1) + 1
            return Found(start, end, found.line, "normalized", 1.0)
        exact = exact or found
    # Text in several places may still be one whole line ("- gym" in "- gym at 7" and "- gym").
    return _by_lines(text, norm_text, norm_search, hint, config, exact)


def _positions(text: str, char: str) -> list[int]:
    found, at = [], text.find(char)
    while at >= 0:
        found.append(at)
        at = text.find(char, at + 1)
    return found


def _exact(text: str, search: str, hint: int | None, how: How) -> Found | NotFound | None:
    first = text.find(search)
    if first < 0:
        return None
    second = text.find(search, first + 1)
    if second < 0:
        return Found(first, first + len(search), text.count("\n", 0, first) + 1, how, 1.0)
    # In two places or more (a short search may be in thousands: only C loops over them).
    if hint is not None and (line_start := _line_start(text, hint)) is not None:
        line_end = text.find("\n", line_start)
        line_end = len(text) if line_end < 0 else line_end
        on_line = text.find(search, line_start)
        if 0 <= on_line <= line_end and not 0 <= text.find(search, on_line + 1) <= line_end:
            return Found(on_line, on_line + len(search), hint, how, 1.0)
    lines = text.count("\n", 0, first) + 1, text.count("\n", 0, second) + 1
    return NotFound("ambiguous", f"the search text is in {max(2, text.count(search))} places "
                    f"(lines {lines[0]}, {lines[1]}, ...); quote more of it, or give the line")


def _line_start(text: str, line: int) -> int | None:
    """Where the 1-based line starts, or None past the end."""
    if line < 1:
        return None
    parts = text.split("\n", line - 1)
    return len(text) - len(parts[-1]) if len(parts) == line else None


def _by_lines(text: str, norm_text: str, norm_search: str, hint: int | None,
              config: MatchConfig, ambiguous: NotFound | None) -> Found | NotFound:
    """Tiers 3 and 4: whole lines, stripped, then approximate (not when the search's text is
    there, in several places: `ambiguous`)."""
    stripped = [line.strip() for line in norm_text.split("\n")]
    wanted = [line.strip() for line in norm_search.strip("\n").split("\n")]
    k, n = len(wanted), len(stripped)
    if k > n:
        return NotFound("missing", f"the search has {k} lines, the text {n}")
    raw_lines = text.split("\n")

    def found(i: int, how: How, score: float) -> Found:
        start = sum(map(len, raw_lines[:i])) + i
        end = start + sum(map(len, raw_lines[i:i + k])) + k - 1
        return Found(start, end, i + 1, how, score)

    same = [i for i in _indexes(stripped, wanted[0], n - k + 1) if stripped[i:i + k] == wanted]
    if len(same) == 1:
        return found(same[0], "lines", 1.0)
    if hint is not None and hint - 1 in same:
        return found(hint - 1, "lines", 1.0)
    if same:
        return NotFound("ambiguous", f"the search lines are in {len(same)} places "
                        f"(lines {', '.join(str(i + 1) for i in same[:5])}); give the line")
    return ambiguous or _approximate(stripped, wanted, hint, config, found)


def _approximate(stripped: list[str], wanted: list[str], hint: int | None, config: MatchConfig,
                 found: Callable[[int, How, float], Found]) -> Found | NotFound:
    k, n = len(wanted), len(stripped)
    search = "\n".join(wanted)
    # rapidfuzz's banded Levenshtein costs about len x ceil(0.4 len / 64) machine words a window
    # at threshold 0.8, plus Python's slicing (and sorting) of the window: the windows read are
    # as many, from the hint outward, as `max_work` buys.
    band = max(1, round(2 * (1 - config.threshold) * len(search)))
    per_window = len(search) * -(-band // 64) + 200
    per_window *= 2 if config.reordered_lines and k > 1 else 1
    affordable = max(1, config.max_work // per_window)
    if hint is None:
        order = list(range(n - k + 1))
        if len(order) > affordable:
            return NotFound("too_costly", f"no exact match, and the text ({n} lines) is too large "
                            "to search approximately without a line hint")
    else:
        centre = min(max(hint - 1, 0), n - k)
        first, last = max(0, centre - config.buffer_lines), min(n - k, centre + config.buffer_lines)
        order = sorted(range(first, last + 1), key=lambda i: (abs(i - centre), i))[:affordable]
    scores = _scores(search, ["\n".join(stripped[i:i + k]) for i in order], config.threshold)
    if config.reordered_lines and k > 1:
        shuffled = ["\n".join(sorted(stripped[i:i + k])) for i in order]
        for j, score in _scores("\n".join(sorted(wanted)), shuffled, config.threshold).items():
            scores[j] = max(score, scores.get(j, 0.0))
    if not scores:
        near = f" within {config.buffer_lines} lines of line {hint}" if hint is not None else ""
        return NotFound("missing", f"nothing{near} is {config.threshold:.0%} similar to the search")
    best = min(scores, key=lambda j: (-scores[j], j))
    close = scores[best] - config.ambiguity_margin
    rivals = [order[j] for j, score in scores.items()
              if abs(order[j] - order[best]) >= k and score >= close]
    if rivals:
        return NotFound("ambiguous", f"lines {order[best] + 1} and {rivals[0] + 1} fit the search "
                        f"about as well ({scores[best]:.2f}); quote more of it, or give the line")
    return found(order[best], "approximate", scores[best])


def _indexes(items: list[str], wanted: str, stop: int) -> list[int]:
    """Where `wanted` is in items[:stop] (list.index runs in C)."""
    found: list[int] = []
    at = -1
    while True:
        try:
            at = items.index(wanted, at + 1, stop)
        except ValueError:
            return found
        found.append(at)


def _scores(search: str, windows: list[str], threshold: float) -> dict[int, float]:
    """Each window's similarity to the search, for those at the threshold or above."""
    hits = process.extract(search, windows, scorer=Levenshtein.normalized_similarity,
                           score_cutoff=threshold, limit=None)
    return {index: float(score) for _, score, index in hits}

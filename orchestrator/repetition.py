"""Loops in a text as it streams: words, sentences and paragraphs repeated back to back. Pure.

    word_loop        a block of 1 to word_window // word_repeats words (1 to 3 by default: 8
                     identical words, or "and then" 8 times), word_repeats times in a row,
                     inside one line
    sentence_cycle   a block of 1 to sentence_block sentences, sentence_repeats times in a row
    paragraph_cycle  one paragraph, paragraph_repeats times in a row

Each rule keeps, for every block length p, how many units in a row have equalled the unit p
before them: p * (n - 1) in a row is the block repeated n times. A unit costs O(longest block),
whatever the length of the text, and a chunk costs what its own characters cost.

What must not stop an answer, and why it does not:
- a word repeated across table cells, code or numbers: `| yes | yes |`, `x = x + 1`, `0, 0, 0`:
  a run of words goes on only over spaces and prose punctuation within a line, and only over
  words with a letter;
- numbered lists: "1." and "2." are sentences of their own, so no two items are equal;
- tables of numbers, rules (`---`), closing braces: units without a letter never make a loop
  alone, and units without a letter or digit are skipped;
- a refrain: a chorus between verses is not repeated back to back.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Literal

PREVIEW_CHARS = 160
Rule = Literal["word_loop", "sentence_cycle", "paragraph_cycle"]

_WORD = re.compile(r"\w+")
# What may stand between two words of a loop: spaces and prose punctuation on one line. Anything
# else (a newline, `|`, `=`, `+`, brackets, quotes of code) starts the run again.
_HARD = re.compile(r"[^ \t,;:.!?…\-–—'\"«»“”„‘’()*]")
_LETTER = re.compile(r"[^\W\d_]")
_ALNUM = re.compile(r"[^\W_]")
_END = re.compile(r"[.!?…。！？]+|\n")
_MAX_WORD = 64  # a longer run of word characters is taken as a word as it stands
_MAX_SENTENCE = 2000  # a longer text without an end is taken as a sentence as it stands


@dataclass(frozen=True)
class Loop:
    rule: Rule
    block: int  # units (words, sentences, paragraphs) in the repeated block
    repeats: int
    preview: str  # the repeated text, at most PREVIEW_CHARS


def preview(text: str) -> str:
    """At most PREVIEW_CHARS of text, its whitespace collapsed."""
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


class _Periods:
    """For each block length 1..max_block, how many units in a row equal the one that many
    units before them."""

    def __init__(self, max_block: int, repeats: int) -> None:
        self.max_block, self.repeats = max(1, max_block), max(2, repeats)
        self.keys: deque[object] = deque(maxlen=self.max_block + 1)
        self.runs = [0] * (self.max_block + 1)

    def push(self, key: object) -> int | None:
        """Add a unit; the shortest block now repeated `repeats` times in a row, if any."""
        keys, runs = self.keys, self.runs
        keys.append(key)
        last = len(keys) - 1
        found = None
        for p in range(1, min(self.max_block, last) + 1):
            if keys[last - p] == key:
                runs[p] += 1
                if found is None and runs[p] >= p * (self.repeats - 1):
                    found = p
            else:
                runs[p] = 0
        return found

    def reset(self) -> None:
        self.keys.clear()
        self.runs = [0] * (self.max_block + 1)


class RepetitionDetector:
    """Feed it a stream's text, chunk by chunk; it says when the text has begun to loop."""

    def __init__(self, *, word_repeats: int = 8, word_window: int = 30,
                 sentence_repeats: int = 10, sentence_block: int = 32,
                 paragraph_repeats: int = 3) -> None:
        self._words = _Periods(word_window // max(word_repeats, 1), word_repeats)
        self._recent_words: deque[str] = deque(maxlen=max(word_window, word_repeats))
        self._word_carry = ""  # a word that the next chunk may go on
        self._broken = False  # a separator since the last word ended the run
        self._sentences = _Periods(sentence_block, sentence_repeats)
        # Per sentence in the periods: its text for a preview, and whether it has a letter.
        self._sentence_text: deque[tuple[str, bool]] = deque(maxlen=self._sentences.max_block + 1)
        self._parts: list[str] = []  # the sentence being written
        self._pending = 0  # its length
        self._line_has_text = False
        self._paragraphs = _Periods(1, paragraph_repeats)
        self._paragraph: tuple[int, bool, str] | None = None  # key, has a letter, preview

    def feed(self, text: str) -> Loop | None:
        """The loop this text completes, if any. Once one is found the stream should stop."""
        if not text:
            return None
        return self._feed_words(text) or self._feed_sentences(text)

    # Words.

    def _feed_words(self, text: str) -> Loop | None:
        buf, self._word_carry = self._word_carry + text, ""
        at = 0
        for match in _WORD.finditer(buf):
            if match.end() == len(buf) and match.end() - match.start() < _MAX_WORD:
                self._separator(buf[at:match.start()])
                self._word_carry = match.group()  # it may go on in the next chunk
                return None
            self._separator(buf[at:match.start()])
            at = match.end()
            if (loop := self._word(match.group())) is not None:
                return loop
        self._separator(buf[at:])
        return None

    def _separator(self, text: str) -> None:
        if text and _HARD.search(text):
            self._broken = True

    def _word(self, word: str) -> Loop | None:
        letter = _LETTER.search(word) is not None
        if self._broken or not letter:  # a number, like a table's bar, ends a run
            self._words.reset()
            self._recent_words.clear()
            self._broken = False
            if not letter:
                return None
        word = word.lower()
        self._recent_words.append(word)
        block = self._words.push(word)
        if block is None:
            return None
        span = list(self._recent_words)[-block * self._words.repeats:]
        return Loop("word_loop", block, self._words.repeats, preview(" ".join(span)))

    # Sentences and paragraphs.

    def _feed_sentences(self, text: str) -> Loop | None:
        at = 0
        for match in _END.finditer(text):
            piece = text[at:match.end()]
            at = match.end()
            newline = match.group() == "\n"
            if not self._line_has_text and piece[:-1 if newline else None].strip():
                self._line_has_text = True
            self._parts.append(piece)
            loop = self._sentence()
            if loop is None and newline:
                blank, self._line_has_text = not self._line_has_text, False
                if blank:
                    loop = self._paragraph_end()
            if loop is not None:
                return loop
        rest = text[at:]
        if rest:
            self._line_has_text = self._line_has_text or bool(rest.strip())
            self._parts.append(rest)
            self._pending += len(rest)
            if self._pending > _MAX_SENTENCE:
                return self._sentence()
        return None

    def _sentence(self) -> Loop | None:
        raw = "".join(self._parts)
        self._parts.clear()
        self._pending = 0
        key = " ".join(raw.split()).lower()
        if not _ALNUM.search(key):
            return None  # a rule, a brace, a blank: neither part of a loop nor a break in one
        letter = bool(_LETTER.search(key))
        self._sentence_text.append((raw, letter))
        key_hash = hash(key)
        if self._paragraph is None:
            self._paragraph = (key_hash, letter, raw[:PREVIEW_CHARS])
        else:
            p_key, p_letter, p_text = self._paragraph
            if len(p_text) < PREVIEW_CHARS:
                p_text += raw[: PREVIEW_CHARS - len(p_text)]
            self._paragraph = (hash((p_key, key_hash)), p_letter or letter, p_text)
        block = self._sentences.push(key)
        if block is None:
            return None
        recent = list(self._sentence_text)[-block:]
        if not any(letter for _, letter in recent):
            return None  # a block of numbers alone: a table or a list of figures
        return Loop("sentence_cycle", block, self._sentences.repeats,
                    preview("".join(text for text, _ in recent)))

    def _paragraph_end(self) -> Loop | None:
        paragraph, self._paragraph = self._paragraph, None
        if paragraph is None:
            return None
        key, letter, text = paragraph
        if self._paragraphs.push(key) is None or not letter:
            return None
        return Loop("paragraph_cycle", 1, self._paragraphs.repeats, preview(text))

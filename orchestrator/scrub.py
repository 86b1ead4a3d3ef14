"""Scrubs jin's fences from what the model writes, across chunk boundaries. Pure.

A model may echo the recalled memory, the summary, the L1 runtime memory, the L2 patterns, the
recovery note, a runtime action's evidence or a session snapshot's digest it was shown.
Whatever stands between `<memory-context>` and `</memory-context>` (or the other fences' tags)
is dropped from the streamed answer and so from the stored one; a stray closing tag is dropped
too.
"""

from __future__ import annotations

import re

from orchestrator.context import FENCE_TAGS

_NAMES = FENCE_TAGS
_ALT = "|".join(re.escape(n) for n in _NAMES)
_OPEN = re.compile(rf"<\s*({_ALT})\b[^>]*>", re.IGNORECASE)
_CLOSE = re.compile(rf"<\s*/\s*({_ALT})\s*>", re.IGNORECASE)
_HOLD_MAX = 80  # a possible tag is held back at most this long


class FenceScrubber:
    def __init__(self) -> None:
        self._pending = ""
        self._inside: str | None = None

    def feed(self, text: str) -> str:
        buf, out = self._pending + text, []
        self._pending = ""
        while buf:
            if self._inside is not None:
                end = next((m for m in _CLOSE.finditer(buf)
                            if m.group(1).lower() == self._inside), None)
                if end is None:
                    self._pending = buf[len(buf) - _partial_tag(buf):]
                    break
                buf, self._inside = buf[end.end():], None
                continue
            tag = min((m for m in (_OPEN.search(buf), _CLOSE.search(buf)) if m),
                      key=lambda m: m.start(), default=None)
            if tag is None:
                keep = _partial_tag(buf)
                out.append(buf[: len(buf) - keep])
                self._pending = buf[len(buf) - keep:]
                break
            out.append(buf[: tag.start()])
            if tag.re is _OPEN:
                self._inside = tag.group(1).lower()
            buf = buf[tag.end():]
        return "".join(out)

    def flush(self) -> str:
        pending, self._pending = self._pending, ""
        return "" if self._inside is not None else pending


def scrub(text: str) -> str:
    scrubber = FenceScrubber()
    return scrubber.feed(text) + scrubber.flush()


_START = re.compile(r"<\s*/?\s*([A-Za-z-]*)")


def _partial_tag(buf: str) -> int:
    """Length of the suffix, from the earliest `<` that may still become one of the tags, that
    must wait for more text (`A <memory-context <b>...` split after the second `<` included)."""
    for start in (i for i, ch in enumerate(buf) if ch == "<"):
        if len(buf) - start > _HOLD_MAX or ">" in buf[start:]:
            continue
        match = _START.match(buf, start)
        name = match.group(1).lower() if match else ""
        at_end = match is not None and match.end() == len(buf)
        if any((at_end and n.startswith(name)) or name.startswith(n) for n in _NAMES):
            return len(buf) - start
    return 0

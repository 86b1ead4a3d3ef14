"""JIN's text markers, taken out of a streamed answer. Pure.

A model without tool calling asks for a runtime action in its text: `<WEB_SEARCH: query>`,
`<SAVE_SESSION>` or `<SAVE_SESSION: title>` (a marker closed at once has no argument).
The marker is consumed: it never reaches the client nor the stored answer, however the stream
splits it. Text that may still become a marker (`<WEB_SE` at the end of a chunk) is held back
until the next chunk says; everything else passes at once.

A marker ends at `>`, or at the end of its line or of the stream when the model forgot the `>`
(what it asked is then the text up to there). The name is read in any case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NAMES = ("WEB_SEARCH", "SAVE_SESSION")
MAX_ARGUMENT_CHARS = 500  # a longer argument is cut here (the rest is still consumed)
_OPEN = re.compile(rf"<\s*({'|'.join(NAMES)})\s*([:>])", re.IGNORECASE)
_PARTIAL = re.compile(r"<\s*([A-Za-z_]*)(\s*)\Z")
_HOLD_MAX = 40  # `<`, spaces, the longest name, spaces: what may still become an opener


@dataclass(frozen=True)
class Marker:
    name: str  # as in NAMES
    argument: str


class MarkerFilter:
    """One per answer stream: feed it chunks, get back the text to pass on and the markers
    the chunk completed."""

    def __init__(self) -> None:
        self._pending = ""  # text that may become an opener
        self._inside: str | None = None  # the name of the marker being read
        self._argument: list[str] = []
        self._length = 0

    def feed(self, text: str) -> tuple[str, list[Marker]]:
        buf, out, found = self._pending + text, [], []
        self._pending = ""
        while buf:
            if self._inside is not None:
                end = next((i for i, ch in enumerate(buf) if ch in ">\n"), None)
                self._take(buf if end is None else buf[:end])
                if end is None:
                    break
                found.append(self._close())
                buf = buf[end + 1:] if buf[end] == ">" else buf[end:]  # a newline stays text
                continue
            opener = _OPEN.search(buf)
            if opener is None:
                keep = _partial_opener(buf)
                out.append(buf[: len(buf) - keep])
                self._pending = buf[len(buf) - keep:]
                break
            out.append(buf[: opener.start()])
            self._inside = opener.group(1).upper()
            buf = buf[opener.end():]
            if opener.group(2) == ">":
                found.append(self._close())
        return "".join(out), found

    def flush(self) -> tuple[str, list[Marker]]:
        """The end of the stream: held text goes on, a marker left open counts as asked."""
        if self._inside is not None:
            return "", [self._close()]
        pending, self._pending = self._pending, ""
        return pending, []

    def _take(self, part: str) -> None:
        if not self._length:
            part = part.lstrip()
        room = MAX_ARGUMENT_CHARS - self._length
        if room > 0:
            self._argument.append(part[:room])
            self._length += min(len(part), room)

    def _close(self) -> Marker:
        marker = Marker(self._inside or "", "".join(self._argument).strip())
        self._inside, self._argument, self._length = None, [], 0
        return marker


def strip_markers(text: str) -> tuple[str, list[Marker]]:
    """A whole text without its markers, and the markers."""
    markers = MarkerFilter()
    text, found = markers.feed(text)
    tail, more = markers.flush()
    return text + tail, found + more


def _partial_opener(buf: str) -> int:
    """Length of the suffix, from the earliest `<` that may still become an opener, to hold."""
    for start in (i for i, ch in enumerate(buf) if ch == "<" and len(buf) - i <= _HOLD_MAX):
        match = _PARTIAL.match(buf, start)
        if match is None:
            continue
        name, space = match.group(1).upper(), match.group(2)
        if (name in NAMES) if space else any(n.startswith(name) for n in NAMES):
            return len(buf) - start
    return 0

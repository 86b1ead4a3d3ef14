"""HTML artifacts at the start of an answer, stripped as it streams. Pure.

Some models and servers open an answer with markup no chat shows: `<div>`, `<p>`, `<pre>`,
`<textarea>`, `<code class="…">`, a closing `</p>`, or a broken tag glued to the text
(`<divПривет`). Tags from a short list are dropped from the start, across chunk boundaries,
until real text begins; from then on nothing is touched (a `<div>` inside an answer is the
answer's). Only a possible tag is held back, never more than _HOLD_MAX characters.
"""

from __future__ import annotations

import re

TAGS = frozenset({
    "div", "p", "pre", "textarea", "code", "span", "html", "body", "head", "br", "blockquote",
    "section", "article", "main",
})
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_AFTER_NAME = frozenset(">/ \t\r\n")
_HOLD_MAX = 256  # a tag whose `>` has not come by then is taken as text


def _may_be_tag(name: str) -> bool:
    return any(tag.startswith(name) for tag in TAGS)


class LeadingHtml:
    """feed() returns the text to pass on; flush() what is left at the end of the stream."""

    def __init__(self) -> None:
        self._held = ""
        self._started = False
        self._removed = False  # a tag went: the space between it and the text goes too

    def feed(self, text: str) -> str:
        if self._started:
            return text
        buf = self._held + text
        while True:
            rest = buf.lstrip()
            if not rest or rest == "<" or rest == "</":
                self._held = buf  # (whitespace, or a tag's first characters)
                return ""
            if rest[0] != "<":
                return self._start(buf, rest)
            at = 2 if rest.startswith("</") else 1
            match = _NAME.match(rest, at)
            if match is None:
                return self._start(buf, rest)  # `<3`, `< 5`, `<<`: text
            name, end = match.group().lower(), match.end()
            if end == len(rest):  # the name may go on in the next chunk
                if _may_be_tag(name) and len(rest) < _HOLD_MAX:
                    self._held = buf
                    return ""
                return self._start(buf, rest)
            after = rest[end]
            if name in TAGS and after in _AFTER_NAME:
                close = rest.find(">", end)
                if close < 0:
                    if len(rest) < _HOLD_MAX:
                        self._held = buf
                        return ""
                    return self._start(buf, rest)
                buf, self._removed = rest[close + 1:], True
            elif _may_be_tag(name) and not after.isascii():
                buf, self._removed = rest[end:], True  # a broken tag glued to the text
            else:
                return self._start(buf, rest)  # `<divide>`, `<Tab>`: not one of ours

    def flush(self) -> str:
        """What is still held when the stream ends is blank or an unfinished tag: dropped."""
        self._held, self._started = "", True
        return ""

    def _start(self, buf: str, rest: str) -> str:
        self._started, self._held = True, ""
        return rest if self._removed else buf

"""Fact text rules. Pure."""

from __future__ import annotations

import re

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def normalize(fact: str) -> str:
    """The text two writes of the same fact share: no bullet, case or spacing differences."""
    text = _BULLET.sub("", fact).strip().rstrip(".;").lower()
    return " ".join(text.split())


def clean(fact: str) -> str:
    return _BULLET.sub("", fact).strip()

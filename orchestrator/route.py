"""The planner: which nodes a step's input goes through. Pure.

    planner -> translator -> brain -> validator     Cyrillic input, with a translator
      ... -> validator -> translator_answer         and JIN_TRANSLATE_ANSWER on
    planner -> brain -> validator                   anything else

The brain reads English best in most small and mid-sized models, so input in a Cyrillic
script is translated for it first when a translator is configured; the brain's answer may be
translated back into the user's language after it (off by default: it doubles the translator's
work and delays the answer's text). The stream validator always watches the brain's answer
(orchestrator/stream_validator.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Cyrillic and Cyrillic Supplement: Russian, Ukrainian, Belarusian, Serbian, Bulgarian... One
# letter is enough: "перевод of this" is still a question asked in Russian.
_CYRILLIC = re.compile("[\u0400-\u052f]")

Node = str  # "planner", "translator", "brain", "validator", "translator_answer"


@dataclass(frozen=True)
class RouteConfig:
    """The deployment's choice (JIN_TRANSLATE_INPUT, which needs a translator, and
    JIN_TRANSLATE_ANSWER, which needs the input translated)."""

    translate_input: bool = False
    translate_answer: bool = False


@dataclass(frozen=True)
class Route:
    nodes: tuple[Node, ...]
    translate_input: bool
    translate_answer: bool = False  # the brain's answer goes back into the user's language


DIRECT = Route(("planner", "brain", "validator"), False)
TRANSLATED = Route(("planner", "translator", "brain", "validator"), True)


def has_cyrillic(text: str) -> bool:
    return _CYRILLIC.search(text) is not None


def plan_route(text: str, kind: str, config: RouteConfig) -> Route:
    """The route of a step whose new message is `text`, of `kind` (a tool's result, which a
    client's program wrote, is never translated)."""
    if kind != "user" or not config.translate_input or not has_cyrillic(text):
        return DIRECT
    if not config.translate_answer:
        return TRANSLATED
    return Route((*TRANSLATED.nodes, "translator_answer"), True, translate_answer=True)

"""What the helper is asked for an L2 distillation, and what it is given. Pure.

As for L1 (memory/runtime_prompt.py), the system text and one worked example come first and
never change (the helper server's prefix cache stays warm); the last user message carries the
window's L1 versions, the user's messages and the patterns known so far.
"""

from __future__ import annotations

from collections.abc import Sequence

from llm.types import PromptMessage
from memory.runtime_patterns import PATTERN_TYPES, L1Sample, Pattern, Said
from memory.runtime_state import text

HELPER_SYSTEM = (
    "You watch a conversation between a user and an assistant for patterns in the user's "
    "behaviour across several turns: " + ", ".join(PATTERN_TYPES) + ".\n"
    "repetition: the user asks or says the same thing again. topic_shift: the user leaves a "
    "topic for another. stress_test: the user probes the assistant's limits or consistency. "
    "contradiction: the user says something that goes against what they said before. "
    "corrected_assumption: the user corrects something that was taken for granted.\n"
    "You get the assistant's running notes (versions of key: value lines), the user's messages, "
    "and the patterns known so far. Write the patterns you see now.\n"
    "Format, strictly: one pattern per line, as `type | confidence | description | evidence`. "
    "type is one of the five above; confidence is low, medium or high; description is one "
    "short sentence; evidence is one or more short quotes, each copied word for word from the "
    "user's messages, in double quotes, separated by `;`. Nothing else. If you see no pattern, "
    "write `none`."
)

MESSAGE_CHARS = 500
EMPTY = "(none)"
_EXAMPLE_ASK = (
    "Notes, version 1:\ncurrent_task: find a flight to Rome\n\nNotes, version 2:\n"
    "current_task: find a flight to Rome\nbudget: 200 euros\n\nUser messages:\n"
    "1. I need a flight to Rome\n2. Is there a flight to Rome under 200 euros?\n"
    "3. Again, any flight to Rome?\n\nPatterns known so far:\n(none)\n\n"
    "Write the patterns now."
)
_EXAMPLE_ANSWER = ('repetition | high | the user asks for a flight to Rome again and again | '
                   '"flight to Rome"; "Again, any flight to Rome?"')


def helper_prompt(window: Sequence[L1Sample], said: Sequence[Said],
                  known: Sequence[Pattern], chars: int = MESSAGE_CHARS) -> list[PromptMessage]:
    parts: list[str] = []
    for snapshot in window:
        parts += [f"Notes, version {snapshot.version}:", text(snapshot.state, marks=False)
                  or EMPTY, ""]
    parts.append("User messages:")
    parts += [f"{n}. {_clip(s.text, chars)}" for n, s in enumerate(said, 1)] or [EMPTY]
    parts += ["", "Patterns known so far:"]
    parts += [f"{p.type} | {p.confidence} | {p.description}" for p in known] or [EMPTY]
    parts += ["", "Write the patterns now."]
    return [PromptMessage("system", HELPER_SYSTEM), PromptMessage("user", _EXAMPLE_ASK),
            PromptMessage("assistant", _EXAMPLE_ANSWER),
            PromptMessage("user", "\n".join(parts))]


def _clip(message: str, chars: int) -> str:
    message = " ".join(message.split())
    return message if len(message) <= chars else message[: chars - 1].rstrip() + "…"

"""What the helper is asked for an L1 rewrite, and the turns it is given. Pure.

The system text and one worked example come first, the same every time (the helper server's
prefix cache stays warm); the last user message carries the previous state and the turns since
it, each clipped. The example is what makes a small helper (the embedded SmolLM2-135M) write
`key: value` lines at all: without it, it copied the prompt back.
"""

from __future__ import annotations

from dataclasses import dataclass

from llm.types import PromptMessage

HELPER_SYSTEM = (
    "You keep the runtime memory of a conversation between a user and an assistant: a compact "
    "state of what the next answer needs to continue correctly.\n"
    "You get the current state and the latest turn. Write the new state in full.\n"
    "Format, strictly: one fact per line, as `key: value`. Keys are lowercase words joined by "
    "underscores (user_name, current_task, open_question). A value is one line of plain text. "
    "No JSON, no Markdown, no lists, no headings, nothing before or after the lines.\n"
    "Keep a line that still holds, unchanged; update a line in place rather than renaming its "
    "key; leave out a line that no longer holds. Start a line with `!` (as in `!user_name: "
    "Ann`) for a durable fact that must be kept for the whole conversation, such as who the "
    "user is or a standing preference.\n"
    "If the current state has an unresolved_turn line, the turn it names did not finish: take "
    "what it says into account and do not write that line yourself."
)

TURN_CHARS = 2000
EMPTY = "(none)"
_EXAMPLE_TURN = (
    f"Current state:\n{EMPTY}\n\nLatest turn:\nUser: Hi, I'm Bob. The front brake of my bike "
    "squeaks.\nAssistant: Hi Bob! Is it a rim brake or a disc brake?\n\nWrite the new state now."
)
_EXAMPLE_STATE = ("!user_name: Bob\ncurrent_task: fix the squeaking front brake of a bike\n"
                  "open_question: rim brake or disc brake")


@dataclass(frozen=True)
class Turn:
    """One finished step: the user's message and the answer, how the step ended, and where the
    answer sits in the chat."""

    position: int  # the answer's
    user_text: str
    answer: str
    status: str  # complete / interrupted / failed
    reason: str  # why a turn that did not complete ended (an abort, a loop, an error code)


def helper_prompt(state_text: str, turns: list[Turn], turn_chars: int = TURN_CHARS) -> list[
        PromptMessage]:
    parts = ["Current state:", state_text or EMPTY, ""]
    for n, turn in enumerate(turns, 1):
        heading = "Latest turn" if len(turns) == 1 else f"Turn {n} of {len(turns)}"
        speaker = "Assistant" if turn.status == "complete" else \
            f"Assistant (did not finish: {turn.reason})"
        parts += [f"{heading}:", f"User: {_clip(turn.user_text, turn_chars)}",
                  f"{speaker}: {_clip(turn.answer, turn_chars)}", ""]
    parts.append("Write the new state now.")
    return [PromptMessage("system", HELPER_SYSTEM), PromptMessage("user", _EXAMPLE_TURN),
            PromptMessage("assistant", _EXAMPLE_STATE), PromptMessage("user", "\n".join(parts))]


def _clip(text: str, chars: int) -> str:
    text = text.strip()
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def pending(turns: list[Turn]) -> tuple[list[Turn], Turn | None]:
    """Of the turns since the state's base, oldest first: those the helper folds in (up to the
    newest complete one, with any that did not finish before it), and the newest turn if it did
    not finish (to be marked unresolved)."""
    last_done = max((i for i, t in enumerate(turns) if t.status == "complete"), default=-1)
    last = turns[-1] if turns else None
    return turns[: last_done + 1], (last if last is not None and last.status != "complete"
                                    else None)

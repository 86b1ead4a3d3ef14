"""L3 session digests: what a snapshot carries of a chat, and how its digest is asked for and
checked. Pure.

A snapshot is built L1 -> (L2) -> L3: the chat's L1 state (memory/runtime_state.py), cut to
its strongest `max_lines` lines, and its L2 patterns when the deployment has them (an optional
text: L2 lives elsewhere), go to the helper, which writes a short digest of the session in
prose. The digest is what a new chat started from the snapshot reads, fenced, in each prompt;
the carried L1 lines are that chat's first L1 state.

    carried        the L1 state a snapshot keeps: durable lines first, then the strongest
    digest_prompt  the helper's messages
    check_digest   the helper's text as a digest within the cap, or DigestRejected
    fallback       a digest made of the carried lines, when the helper failed
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from llm.types import PromptMessage
from memory.runtime_state import UNRESOLVED_KEY, State, render, text

DIGEST_SYSTEM = (
    "You write the digest of a conversation session, so that a later conversation can start "
    "from where this one stands. You get the session's running notes as `key: value` lines "
    "(and, when there are any, notes on how the conversation went).\n"
    "Write a short digest in plain prose: who the user is, what they are working on, what "
    "was decided, what is still open. Keep names, numbers and decisions exact. Do not invent "
    "anything that the notes do not say. No headings, no lists, no Markdown."
)
EMPTY = "(none)"
FALLBACK_HEADING = "Notes carried from an earlier session:"


class DigestRejected(Exception):
    """The helper's text cannot stand as the digest; `reason` is truncated (it hit its token
    limit) or empty."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def carried(state: State, max_lines: int) -> State:
    """The L1 state a snapshot keeps: at most `max_lines` lines, durable ones first, then by
    strength, in the state's own order. The unresolved-turn line is the old chat's business and
    stays behind; the tombstones come along, so a deleted line does not come back."""
    lines = [line for line in state.lines if line.key != UNRESOLVED_KEY]
    kept = set(sorted(range(len(lines)),
                      key=lambda i: (not lines[i].durable, -lines[i].strength))[:max_lines])
    return replace(state, lines=tuple(line for i, line in enumerate(lines) if i in kept))


def digest_prompt(title: str, l1: State, l2_text: str | None = None) -> list[PromptMessage]:
    """The helper's messages: the instructions, then the session's notes."""
    parts = [f"Session title: {' '.join(title.split()) or '(untitled)'}", "",
             "Running notes:", text(l1, marks=False) or EMPTY]
    if l2_text is not None and l2_text.strip():
        parts += ["", "How the conversation went:", l2_text.strip()]
    parts += ["", "Write the digest now."]
    return [PromptMessage("system", DIGEST_SYSTEM), PromptMessage("user", "\n".join(parts))]


def check_digest(raw: str, finish_reason: str | None) -> str:
    """The helper's digest, its whitespace tidied. DigestRejected when it was cut off by its
    token limit (a digest that stops mid-sentence) or says nothing."""
    if finish_reason == "length":
        raise DigestRejected("truncated")
    body = "\n".join(" ".join(line.split()) for line in raw.strip().splitlines()).strip()
    while "\n\n\n" in body:
        body = body.replace("\n\n\n", "\n\n")
    if not body:
        raise DigestRejected("empty")
    return body


def fallback(l1: State, budget_tokens: int, count: Callable[[str], int]) -> str:
    """A digest without the model: the carried lines, strongest first, within the budget."""
    lines = render(l1, max(budget_tokens - count(FALLBACK_HEADING) - 1, 0), count)
    return f"{FALLBACK_HEADING}\n{lines}" if lines else ""

"""A model's whole answer, for the callers that need all of it before they can use any: the
helper's summaries, runtime memory, patterns, digests and extractions, and the translator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from llm.ports import ChatModel
from llm.types import CompletionRequest, ContentDelta, Delta, Finish


@dataclass(frozen=True)
class Completion:
    """The answer's text (a thinking model's reasoning left out), why it ended, and the
    provider's usage (empty when it reported none)."""

    text: str
    finish: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def cut(self) -> bool:
        """Whether the token cap ended it: the text is the start of an answer, not an answer."""
        return self.finish == "length"


async def collect(deltas: AsyncIterator[Delta]) -> Completion:
    """Read a stream of deltas to its end. Raises whatever the stream raises (LLMError)."""
    parts: list[str] = []
    finish: Finish | None = None
    async for delta in deltas:
        if isinstance(delta, ContentDelta):
            parts.append(delta.text)
        elif isinstance(delta, Finish):
            finish = delta
    if finish is None:
        return Completion("".join(parts))
    return Completion("".join(parts), finish.reason, dict(finish.usage))


async def complete(model: ChatModel, request: CompletionRequest) -> Completion:
    """The model's whole answer to `request`. Raises LLMError."""
    return await collect(model.stream(request))

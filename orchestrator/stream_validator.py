"""The stream validator: watches an answer and its reasoning chunk by chunk. Pure.

It strips HTML artifacts from the start of the answer (orchestrator/leading_html.py) and stops
loops (orchestrator/repetition.py). It holds nothing back but a possible leading tag: each
chunk is passed on as it comes, or, when it completes a loop, not at all, and the step stops
the model there.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from chat.types import ModelSettings
from orchestrator.leading_html import LeadingHtml
from orchestrator.repetition import Loop, RepetitionDetector

Where = Literal["answer", "reasoning"]


@dataclass(frozen=True)
class ValidatorConfig:
    """The deployment's thresholds (JIN_VALIDATOR_*), overridden per chat (`for_chat`)."""

    enabled: bool = True
    word_repeats: int = 8  # identical words in a row ...
    word_window: int = 30  # ... and blocks of up to word_window // word_repeats words
    sentence_repeats: int = 10  # a block of sentences repeated this many times in a row ...
    sentence_block: int = 32  # ... of up to this many sentences
    paragraph_repeats: int = 3  # one paragraph repeated this many times in a row
    strip_html: bool = True  # strip HTML artifacts from the start of the answer

    def for_chat(self, settings: ModelSettings) -> ValidatorConfig:
        """These thresholds with a chat's own (ModelSettings `validator`, `validator_*`)."""
        own: dict[str, Any] = {}
        if settings.validator is not None:
            own["enabled"] = settings.validator
        for f in dataclasses.fields(self):
            value = getattr(settings, f"validator_{f.name}", None)
            if value is not None:
                own[f.name] = value
        return dataclasses.replace(self, **own) if own else self

    def detector(self) -> RepetitionDetector:
        return RepetitionDetector(
            word_repeats=self.word_repeats, word_window=self.word_window,
            sentence_repeats=self.sentence_repeats, sentence_block=self.sentence_block,
            paragraph_repeats=self.paragraph_repeats,
        )


@dataclass(frozen=True)
class LoopStop:
    """Why a step stopped its model: where the loop was, and what it was."""

    where: Where
    loop: Loop

    @property
    def text(self) -> str:
        what = {
            "word_loop": f"a block of {self.loop.block} word(s)",
            "sentence_cycle": f"a block of {self.loop.block} sentence(s)",
            "paragraph_cycle": "a paragraph",
        }[self.loop.rule]
        return (f"the {self.where} began to repeat itself ({self.loop.rule}: {what} "
                f"{self.loop.repeats} times in a row); the model was stopped")

    def to_json(self) -> dict[str, Any]:
        return {"where": self.where, "rule": self.loop.rule, "block": self.loop.block,
                "repeats": self.loop.repeats, "preview": self.loop.preview}


class StreamValidator:
    """One per stream (the answer, the reasoning) of a step."""

    def __init__(self, config: ValidatorConfig, where: Where) -> None:
        self.where = where
        self._on = config.enabled
        self._loops = config.detector()
        self._html = LeadingHtml() if config.enabled and config.strip_html \
            and where == "answer" else None

    def feed(self, text: str) -> tuple[str, LoopStop | None]:
        """The text to pass on, or the loop it completes (and then nothing to pass on)."""
        if not self._on:
            return text, None
        if self._html is not None:
            text = self._html.feed(text)
        loop = self._loops.feed(text)
        if loop is not None:
            return "", LoopStop(self.where, loop)
        return text, None

    def finish(self, text: str) -> str:
        """The end of the stream, with what the stages before held: passed on without a loop
        check (the model has finished); a possible leading tag still held is dropped."""
        if self._html is None:
            return text
        return self._html.feed(text) + self._html.flush()

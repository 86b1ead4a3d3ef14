"""The text of an answer and of its reasoning on its way to the client. Pure.

Each stream goes through the same three stages: jin's fences scrubbed (a model may echo one),
JIN's markers taken out (when runtime actions run), then the stream validator. A marker is
consumed in either stream, so no raw marker is ever shown or stored; only the answer's markers
are run (the step decides: orchestrator/answer.py). The reasoning is the model weighing what to
do, as in JIN, where a marker it drafts while thinking is never acted on.
"""

from __future__ import annotations

from orchestrator.markers import Marker, MarkerFilter
from orchestrator.scrub import FenceScrubber
from orchestrator.stream_validator import LoopStop, StreamValidator, ValidatorConfig, Where


class StreamText:
    """One per stream (the answer, the reasoning) of an answer."""

    def __init__(self, validator: ValidatorConfig, where: Where, markers: bool) -> None:
        self.scrubber = FenceScrubber()
        self.markers = MarkerFilter() if markers else None
        self.check = StreamValidator(validator, where)

    def feed(self, text: str) -> tuple[str, list[Marker], LoopStop | None]:
        """The text to pass on, the markers it completed, and the loop it completed."""
        text, asked = self._unmarked(self.scrubber.feed(text))
        said, loop = self.check.feed(text)
        return said, asked, loop

    def end_of_call(self) -> tuple[str, list[Marker], LoopStop | None]:
        """One model call's stream ended: a marker it left open counts as asked, and text
        held as a possible marker goes on."""
        if self.markers is None:
            return "", [], None
        text, asked = self.markers.flush()
        said, loop = self.check.feed(text) if text else ("", None)
        return said, asked, loop

    def finish(self) -> str:
        """The model has finished: what was held goes on (a loop no longer matters)."""
        text, _ = self._unmarked(self.scrubber.flush())
        if self.markers is not None:
            text += self.markers.flush()[0]  # (a marker opened here is not run: dropped)
        return self.check.finish(text)

    def _unmarked(self, text: str) -> tuple[str, list[Marker]]:
        return self.markers.feed(text) if self.markers is not None else (text, [])

"""How a step's answer ended, as a value: decided once, from how its stream ended (or what
failed before it), and persisted in one place (orchestrator/saving.py `persist`).

    Complete        the model finished its answer
    Interrupted     an abort, a client gone, a shutdown, a cancelled task; a loop the stream
                    validator stopped (loop_detected, with a preview); or an answer that could
                    not be saved (`code` says why: answer_not_saved, lease_lost)
    Failed          the provider failed (its LLMError code), the database (database_unavailable)
                    or jin (internal_error)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from chat.ports import StoreUnavailable
from llm.errors import LLMError
from orchestrator.stream_validator import LoopStop


@dataclass(frozen=True)
class Complete:
    type: Literal["complete"] = "complete"


@dataclass(frozen=True)
class Interrupted:
    reason: str  # aborted, client_disconnected, shutdown, cancelled, loop_detected, not_saved
    code: str | None = None  # set when the client must be told why (a message_error)
    text: str = ""
    preview: str | None = None  # loop_detected: the looped text
    type: Literal["interrupted"] = "interrupted"


@dataclass(frozen=True)
class Failed:
    code: str
    text: str
    type: Literal["failed"] = "failed"


Outcome = Complete | Interrupted | Failed


def stream_outcome(
    error: BaseException | None, aborted: str | None, finished: bool,
    loop: LoopStop | None = None,
) -> Outcome:
    """How the answer's stream ended: with `error` raised out of it (None if it ran out), an
    abort's reason if one was asked for, whether the model sent its finish, and the loop the
    stream validator stopped it for, if it did."""
    if isinstance(error, LLMError):
        return Failed(error.code, str(error))
    if isinstance(error, StoreUnavailable):  # reading the window again, before the answer
        return Failed("database_unavailable", "the database could not be reached")
    if error is not None and not isinstance(error, Exception):
        return Interrupted("cancelled")  # the task was cancelled, or the stream closed
    if error is not None:  # a bug must not pass for an answer: the text is kept, as failed
        return Failed("internal_error", type(error).__name__)
    if loop is not None:
        return Interrupted("loop_detected", "loop_detected", loop.text, loop.loop.preview)
    if aborted is not None and not finished:
        return Interrupted(aborted)
    return Complete()


def error_of(outcome: Outcome) -> tuple[str, str] | None:
    """The (code, text) a client is told in a message_error, if any."""
    if isinstance(outcome, Failed):
        return outcome.code, outcome.text
    if isinstance(outcome, Interrupted) and outcome.code is not None:
        return outcome.code, outcome.text
    return None

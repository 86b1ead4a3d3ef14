"""Errors of a step that are the caller's doing; the API turns them into problem+json.

    StepError                 root; `code` is stable, `status` is the HTTP status
    ├── ChatNotFound          404 chat_not_found
    ├── ChatBusy              409 chat_busy     another step runs and the policy says reject,
    │                                           or the bounded wait ran out
    ├── HistoryMoved          409 history_moved another request wrote to the chat since the
    │                                           caller read it (the caller reads it again)
    └── MessageTooLarge       413 message_too_large

Failures of the model are not here: they end a stream as a `message_error` event (llm.errors).
"""

from __future__ import annotations


class StepError(Exception):
    code = "step_error"
    status = 400


class ChatNotFound(StepError):
    code = "chat_not_found"
    status = 404


class ChatBusy(StepError):
    code = "chat_busy"
    status = 409


class HistoryMoved(StepError):
    code = "history_moved"
    status = 409


class MessageTooLarge(StepError):
    code = "message_too_large"
    status = 413

"""Structured logs: one JSON object per line, carrying the request, chat and step it is about.

The ids live in context variables: the edge sets the request and chat, the runtime the step,
and asyncio copies them into every task a request starts. Log lines carry ids, codes and
timings, never message text or keys; uvicorn's access log (which would print query strings)
is replaced by the edge's own line.
"""

from __future__ import annotations

import json
import logging
import logging.config
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
chat_id: ContextVar[str | None] = ContextVar("chat_id", default=None)
step_id: ContextVar[str | None] = ContextVar("step_id", default=None)

_CONTEXT = {"request_id": request_id, "chat_id": chat_id, "step_id": step_id}
# Attributes every LogRecord has; anything else passed as `extra=` goes into the line.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {
    "message", "asctime", "taskName", "color_message"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name, var in _CONTEXT.items():
            value = var.get()
            if value is not None:
                line[name] = value
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_"):
                line[name] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        ids = " ".join(f"{n}={v.get()}" for n, v in _CONTEXT.items() if v.get() is not None)
        return f"{text} [{ids}]" if ids else text


def config(level: str, fmt: Literal["json", "text"]) -> dict[str, Any]:
    """A logging dictConfig for jin and uvicorn alike (uvicorn.run takes it as log_config)."""
    formatter = JsonFormatter if fmt == "json" else TextFormatter
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"jin": {"()": formatter}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "jin",
                                "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": level.upper()},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            "uvicorn.access": {"handlers": [], "propagate": False, "level": "WARNING"},
            # Statement text and parameters hold message content: never at the default level.
            "sqlalchemy.engine": {"level": "WARNING"},
            "alembic": {"level": "WARNING"},  # a dozen plugin lines on every start
        },
    }


def configure(level: str, fmt: Literal["json", "text"]) -> None:
    logging.config.dictConfig(config(level, fmt))
    logging.captureWarnings(True)
    if fmt == "json" and sys.stderr.isatty():
        logging.getLogger("jin").info("logging as JSON lines (JIN_LOG_FORMAT=text for humans)")

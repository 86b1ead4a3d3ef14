"""Embeddings from any OpenAI-compatible `/embeddings` endpoint, over its Provider's client.

Vectors are asked for as base64 (float32, little-endian, as OpenAI sends them): 384 floats as JSON
text cost the worker more to decode than anything else in a recall. A server that ignores the
format answers lists of numbers, which are read too; one that refuses it (400 or 422) is asked
again for floats, and from then on only for floats.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any

import numpy as np

from llm.errors import LLMError, MalformedStream, ProviderHTTPError
from llm.ports import Embedding
from llm.provider import Provider

log = logging.getLogger("jin.embeddings")

_REFUSED_FORMAT = frozenset({400, 422})  # how servers that validate the body refuse a field


class OpenAIEmbedder:
    """Embedder over HTTP. Vectors are normalised here: not every server does it."""

    def __init__(
        self, provider: Provider, *, dim: int | None = None, batch_size: int = 64,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.config = provider.config
        self.name = provider.config.model
        self.batch_size = batch_size
        self._provider = provider
        self._dim = dim
        self._format = "base64"  # "float" once the server has refused base64
        self._format_known = False  # a base64 answer came: a 400 after that is about the input

    @property
    def dim(self) -> int:
        if self._dim is None:
            raise RuntimeError(
                f"the dimension of {self.name!r} is known after its first embed call; "
                "pass dim= to know it before"
            )
        return self._dim

    async def embed(self, texts: list[str]) -> list[Embedding]:
        out: list[Embedding] = []
        for start in range(0, len(texts), self.batch_size):
            out.extend(await self._batch(texts[start : start + self.batch_size]))
        return out

    @property
    def symmetric(self) -> bool:
        return True  # an OpenAI-style endpoint embeds every text alike

    async def embed_query(self, texts: list[str]) -> list[Embedding]:
        """Same as embed: an OpenAI-style endpoint has no query/passage distinction."""
        return await self.embed(texts)

    async def _batch(self, texts: list[str]) -> list[Embedding]:
        matrix = _matrix(await self._ask(texts), len(texts))
        if self._dim is None:
            self._dim = matrix.shape[1]
        elif matrix.shape[1] != self._dim:
            raise LLMError(
                f"{self.name!r} answered {matrix.shape[1]}-dim vectors, expected {self._dim}"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return list((matrix / np.clip(norms, 1e-12, None)).astype(np.float32))

    async def _ask(self, texts: list[str]) -> Any:
        body = {"model": self.config.model, "input": texts, "encoding_format": self._format}
        try:
            payload = await self._provider.json("/embeddings", body)
        except ProviderHTTPError as exc:
            if self._format_known or exc.status not in _REFUSED_FORMAT:
                raise
            # Maybe the format, maybe an input: asked again for floats, an input is still
            # refused (and that error raised); if the floats come, the format was the trouble.
            payload = await self._provider.json("/embeddings",
                                                {**body, "encoding_format": "float"})
            self._format, self._format_known = "float", True
            log.info("%s refused base64 embeddings (HTTP %d); asking for floats from now on",
                     self.name, exc.status)
            return payload
        self._format_known = True
        return payload


def _row(embedding: Any) -> Any:
    """One vector as sent: base64 of little-endian float32s, or a list of numbers."""
    if not isinstance(embedding, str):
        return embedding
    try:
        raw = base64.b64decode(embedding, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MalformedStream("`/embeddings` answered a vector that is not base64") from exc
    if len(raw) % 4:
        raise MalformedStream(f"`/embeddings` answered {len(raw)} bytes, not float32s")
    return np.frombuffer(raw, dtype="<f4")


def _matrix(payload: Any, count: int) -> np.ndarray:
    """The answer's vectors as rows in input order (servers may list them in any order)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise MalformedStream(f"`/embeddings` answered no list of vectors: {str(payload):.120}")
    indices = [item.get("index") for item in data]
    if not all(isinstance(i, int) for i in indices) or sorted(indices) != list(range(count)):
        raise MalformedStream(f"`/embeddings` answered indices {indices[:8]} for {count} inputs")
    rows = [_row(item.get("embedding"))
            for item in sorted(data, key=lambda item: item["index"])]
    try:
        matrix = np.array(rows, dtype=np.float64)
    except (TypeError, ValueError) as exc:  # ragged rows, strings
        raise MalformedStream("`/embeddings` answered vectors that are not numbers") from exc
    if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
        raise MalformedStream(f"`/embeddings` answered vectors of shape {matrix.shape}")
    return matrix

"""The narrow ports the core depends on. Adapters live in openai.py, embeddings.py,
onnx_embedder.py, e5_embedder.py, tokens.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

import numpy as np

from llm.types import CompletionRequest, Delta


class ChatModel(Protocol):
    """A model that answers a prompt."""

    def stream(self, request: CompletionRequest) -> AsyncIterator[Delta]:
        """Yield content and reasoning deltas, then exactly one Finish. Raises LLMError."""
        ...


# A text's embedding: a 1-D float32 array of unit length. Arrays, not lists of floats: a list
# of 384 Python floats costs ~16 us to make and to turn back into the array Postgres is sent.
Embedding = np.ndarray


class Embedder(Protocol):
    """Turns texts into unit vectors of a fixed dimension."""

    @property
    def dim(self) -> int:
        """The vector dimension."""
        ...

    async def embed(self, texts: list[str]) -> list[Embedding]:
        """One L2-normalised vector per text, in order: texts to be found (stored memories)."""
        ...

    async def embed_query(self, texts: list[str]) -> list[Embedding]:
        """As embed, for texts that search (models such as e5 embed the two sides apart)."""
        ...

    @property
    def symmetric(self) -> bool:
        """Whether embed_query gives a text the vector embed gives it, so that a query's
        vector can be stored as the text's own."""
        ...


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder that also gives a text's token vectors before pooling (the built-in one):
    what late-interaction rerank scores (memory/late_interaction.py)."""

    async def token_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Per text, one unit row per token (tokens x dim, float32)."""
        ...


class TokenCounter(Protocol):
    """Counts tokens the way the context budget is measured."""

    def count(self, text: str) -> int:
        """Tokens in a text."""
        ...

    def count_lines(self, text: str) -> int:
        """Tokens in a text, as count(text), for a new text made of lines counted before."""
        ...

"""Which embedder a deployment uses: a configured OpenAI-compatible server, else a built-in one."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from api.settings import Settings
from llm.ports import Embedder
from llm.provider import Provider
from llm.types import ProviderConfig

log = logging.getLogger("jin.embedder")


def embedder_server(settings: Settings) -> Provider | None:
    """The configured embedder server with a client of its own (to close), or None when a
    built-in embedder serves."""
    configured = settings.provider("embedder")
    return None if configured is None else Provider(configured, settings.http_config())


def build_embedder(settings: Settings, server: Provider | None) -> tuple[Embedder, ProviderConfig]:
    """The embedder (over `server`, else built in) and how /v1/status describes it. `model`
    names it on every vector it writes, so `jin reindex` can tell vectors of another model
    apart."""
    if server is not None:
        from llm.embeddings import OpenAIEmbedder

        embedder = OpenAIEmbedder(server, dim=settings.embedding_dim,
                                  batch_size=settings.indexer_batch_size)
        return embedder, server.config
    if settings.embedder == "e5":
        from llm.e5_embedder import E5Embedder

        built: Any = E5Embedder(threads=settings.embedding_threads())
    else:
        from llm.onnx_embedder import OnnxMiniLM

        built = OnnxMiniLM(threads=settings.embedding_threads())
    provider = ProviderConfig(role="embedder", base_url="(in process)", model=built.name,
                              embedded=True)
    return built, provider


async def served_dim(server: Provider | None) -> int | None:
    """What a configured embedder server really returns, by one call (JIN_EMBEDDING_DIM only
    says what it should); None when it cannot be asked now (it may come up later)."""
    if server is None:
        return None
    from llm.embeddings import OpenAIEmbedder
    from llm.errors import LLMError

    probe = OpenAIEmbedder(server, dim=None)
    try:
        await asyncio.wait_for(probe.embed(["dimension probe"]), 10)
    except (LLMError, TimeoutError) as exc:
        log.warning("could not ask the embedder for its dimension (%s)", exc)
        return None
    return probe.dim


def duplicate_cosine(settings: Settings) -> float:
    """The similarity at which a new fact is the same fact, for this deployment's embedder.
    e5 scores unrelated sentences around 0.8 and "my sister is allergic to peanuts" against "my
    brother ..." at 0.95; MiniLM spreads them out (0.92 is a paraphrase)."""
    if settings.fact_duplicate_cosine is not None:
        return settings.fact_duplicate_cosine
    return 0.97 if settings.builtin_e5() else 0.92

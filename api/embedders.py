"""Which embedder a deployment uses: a configured OpenAI-compatible server, else a built-in one."""

from __future__ import annotations

from typing import Any

from api.settings import Settings
from llm.ports import Embedder
from llm.types import ProviderConfig


def build_embedder(settings: Settings, http: Any) -> tuple[Embedder, ProviderConfig]:
    """The embedder and how /v1/status describes it. `model` names it on every vector it
    writes, so `jin reindex` can tell vectors of another model apart."""
    configured = settings.provider("embedder")
    if configured is not None:
        from llm.embeddings import OpenAIEmbedder

        embedder = OpenAIEmbedder(configured, http, dim=settings.embedding_dim,
                                  batch_size=settings.indexer_batch_size)
        return embedder, configured
    if settings.embedder == "e5":
        from llm.e5_embedder import E5Embedder

        built: Any = E5Embedder()
    else:
        from llm.onnx_embedder import OnnxMiniLM

        built = OnnxMiniLM(threads=settings.embedded_model_threads)
    provider = ProviderConfig(role="embedder", base_url="(in process)", model=built.name,
                              embedded=True)
    return built, provider

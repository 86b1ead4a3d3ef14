"""Late interaction, in the style of ColBERT: a text kept as its token vectors, a question scored
against it by MaxSim (for each of the question's tokens, its best match among the text's; their
mean).

The vectors are the built-in embedder's own before pooling (llm/onnx_embedder.py
`token_vectors`), precomputed when an event is written and kept small: neighbouring tokens that
say nearly the same (cosine `MERGE` or more: the pieces of one word, a repeated word) merge into
their mean, the closest neighbours go on merging until at most `MAX_VECTORS` are left, and each
vector is stored as int8 with its own scale. A text of 30 tokens takes ~12 KB as float32 and
~3 KB packed. Scoring a shortlist of events is a few small matrix products, where a
cross-encoder reads every pair through the whole model.
"""

from __future__ import annotations

import struct

import numpy as np

MERGE = 0.9  # cosine of two neighbouring tokens that merge into one vector
MAX_VECTORS = 48
_HEADER = struct.Struct("<HH")  # vectors, dimension


def merged(tokens: np.ndarray, *, merge: float = MERGE,
           max_vectors: int = MAX_VECTORS) -> np.ndarray:
    """The token vectors with near-alike neighbours merged into their (renormalised) mean."""
    groups = [[row] for row in tokens.astype(np.float32)]
    means = [row for row in tokens.astype(np.float32)]
    while len(means) > 1:
        near = np.array([float(means[i] @ means[i + 1]) for i in range(len(means) - 1)])
        best = int(near.argmax())
        if near[best] < merge and len(means) <= max_vectors:
            break
        groups[best:best + 2] = [groups[best] + groups[best + 1]]
        mean = np.mean(groups[best], axis=0)
        means[best:best + 2] = [mean / max(float(np.linalg.norm(mean)), 1e-12)]
    return np.array(means, dtype=np.float32).reshape(len(means), tokens.shape[1])


def pack(tokens: np.ndarray) -> bytes:
    """Merged, then int8 with a float16 scale a vector: what `events.tokens` holds."""
    rows = merged(tokens)
    scales = np.clip(np.abs(rows).max(axis=1), 1e-12, None) / 127
    quantised = np.round(rows / scales[:, None]).astype(np.int8)
    header = _HEADER.pack(*rows.shape)
    return b"".join([header, scales.astype(np.float16).tobytes(), quantised.tobytes()])


def unpack(blob: bytes) -> np.ndarray:
    count, dim = _HEADER.unpack_from(blob)
    at = _HEADER.size
    scales = np.frombuffer(blob, np.float16, count, at).astype(np.float32)
    quantised = np.frombuffer(blob, np.int8, count * dim, at + 2 * count)
    return quantised.reshape(count, dim).astype(np.float32) * scales[:, None]


def maxsim(question: np.ndarray, text: np.ndarray) -> float:
    """The mean, over the question's tokens, of each one's best similarity in the text."""
    if not len(question) or not len(text):
        return 0.0
    return float((question @ text.T).max(axis=1).mean())

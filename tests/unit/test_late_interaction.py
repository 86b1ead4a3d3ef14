"""Late interaction's storage and score: token merging, int8 packing, MaxSim."""

from __future__ import annotations

import numpy as np

from memory.late_interaction import MAX_VECTORS, maxsim, merged, pack, unpack


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_alike_neighbours_merge_and_a_long_text_is_bounded() -> None:
    rng = np.random.default_rng(0)
    word = _unit(rng.standard_normal((1, 384)))
    other = _unit(rng.standard_normal((1, 384)))
    tokens = np.vstack([word, word, word, other])  # a word split in pieces, then another
    assert merged(tokens).shape == (2, 384)
    assert np.allclose(merged(tokens)[0], word[0], atol=1e-6)
    long = _unit(rng.standard_normal((200, 384)))  # 200 distinct tokens
    assert merged(long).shape == (MAX_VECTORS, 384)


def test_packed_vectors_come_back_within_int8_error_at_a_quarter_of_the_size() -> None:
    tokens = _unit(np.random.default_rng(1).standard_normal((30, 384)))
    blob = pack(tokens)
    back = unpack(blob)
    assert back.shape == (30, 384)
    cosines = (back * tokens).sum(axis=1) / np.linalg.norm(back, axis=1)
    assert cosines.min() > 0.999
    assert len(blob) < tokens.nbytes / 3.5


def test_maxsim_is_the_mean_best_match_of_the_questions_tokens() -> None:
    rng = np.random.default_rng(2)
    text = _unit(rng.standard_normal((10, 384)))
    assert abs(maxsim(text[:3], text) - 1.0) < 1e-5  # every question token is in the text
    unrelated = _unit(rng.standard_normal((3, 384)))
    assert maxsim(unrelated, text) < 0.3
    half = np.vstack([text[:1], unrelated[:1]])
    assert abs(maxsim(half, text) - (1 + (unrelated[:1] @ text.T).max()) / 2) < 1e-5
    assert maxsim(text[:0], text) == 0.0

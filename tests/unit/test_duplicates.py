"""Deciding the facts of one write in order (memory/duplicates.py), without a database."""

from __future__ import annotations

import uuid

import numpy as np

from memory.duplicates import Add, Batch, Candidate, Stored, Supersede, Touch


def _fact(text: str, vector: list[float]) -> Candidate:
    v = np.asarray(vector, dtype=np.float32)
    return Candidate(text.lower(), text, v / np.linalg.norm(v), uuid.uuid4())


def test_a_later_fact_is_weighed_against_what_the_write_already_made() -> None:
    batch = Batch(duplicate_cosine=0.9)
    first = _fact("The user likes green tea", [1, 0, 0])
    again = _fact("The user likes green tea!", [1, 0.05, 0])
    other = _fact("Room 101 has code K7001", [0, 1, 0])
    assert batch.decide(first, None, None) == Add(first)
    assert batch.decide(again, None, None) == Supersede(first.new_id, again)
    assert batch.decide(other, None, None) == Add(other)
    stored = Stored(uuid.uuid4(), "The user likes green tea!!")
    assert isinstance(batch.decide(_fact("x", [0, 0, 1]), stored, None), Touch)


def test_a_fact_whose_own_text_this_write_ended_goes_one_by_one() -> None:
    """One by one, the ended row is gone before the fact is written; in a batch it is still
    current until the supersede runs, so the fact is handed back to be written alone."""
    batch = Batch(duplicate_cosine=0.9)
    paris = Stored(uuid.uuid4(), "My sister lives in Paris", similarity=0.95)
    moved = _fact("My sister now lives in Paris", [1, 0, 0])
    assert batch.decide(moved, None, paris) == Supersede(paris.id, moved)
    back = _fact("my sister lives in paris", [1, 0.1, 0])
    elsewhere = Stored(uuid.uuid4(), "The user likes tea", similarity=0.2)  # HNSW missed Paris
    assert batch.decide(back, Stored(paris.id, paris.text), elsewhere) is None


def test_a_fact_whose_nearest_this_write_ended_goes_one_by_one() -> None:
    batch = Batch(duplicate_cosine=0.9)
    old = Stored(uuid.uuid4(), "The user likes green tea", similarity=0.95)
    assert isinstance(batch.decide(_fact("The user likes green tea!", [1, 0, 0]), None, old),
                      Supersede)
    assert batch.decide(_fact("Something else", [0, 1, 0]), None, old) is None

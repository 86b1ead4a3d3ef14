"""Which facts of one write are new, the same as a stored one, or a close paraphrase. Pure.

A write of several facts gives the same result as writing them one after another: a later fact
may update or supersede what an earlier one of the same write stored. The store looks every fact
up at once (the same text, the nearest stored fact), then `Batch.decide` takes them in order and
keeps what the write so far changed: rows it ended, rows it created, rows that gained a vector.
When that is not enough to decide as the one-by-one write would (the nearest stored fact was
ended by this very write, so the next nearest is unknown), it says so, and the store looks that
fact up again after writing what was decided.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np

from memory.facts import key_terms


@dataclass(frozen=True)
class Stored:
    """A stored current fact, as found for a candidate."""

    id: uuid.UUID
    text: str
    similarity: float = 1.0  # to the candidate (the nearest), 1.0 for the same text
    has_vector: bool = True


@dataclass(frozen=True)
class Candidate:
    norm: str
    text: str
    vector: np.ndarray  # unit length
    new_id: uuid.UUID
    sources: tuple[uuid.UUID, ...] = ()  # the messages it was drawn from


@dataclass(frozen=True)
class Add:
    fact: Candidate
    type: str = "add"


@dataclass(frozen=True)
class Touch:
    """The same text is stored: it gains the sources (and the vector, if it had none)."""

    id: uuid.UUID
    fact: Candidate
    type: str = "touch"


@dataclass(frozen=True)
class Supersede:
    """A close paraphrase is stored: it ends, and the candidate replaces it."""

    old_id: uuid.UUID
    fact: Candidate
    type: str = "supersede"


Decision = Add | Touch | Supersede


@dataclass
class _Row:
    id: uuid.UUID
    text: str
    vector: np.ndarray


@dataclass
class Batch:
    """The facts of one write, decided in order against what was stored before it began."""

    duplicate_cosine: float
    ended: set[uuid.UUID] = field(default_factory=set)
    rows: list[_Row] = field(default_factory=list)  # current rows this write created or vectored

    def decide(
        self, fact: Candidate, same: Stored | None, nearest: Stored | None
    ) -> Decision | None:
        """What writing `fact` now would do, given what its lookup found before the write
        began; None when that lookup no longer tells (look it up again)."""
        if same is not None and same.id not in self.ended:
            if not same.has_vector:  # it gains this vector: a later fact may find it nearest
                self.rows.append(_Row(same.id, same.text, fact.vector))
            return Touch(same.id, fact)
        if same is not None:
            # Its own text was ended by this write: one by one, that row is gone before this
            # fact is written; here it is still current until the supersede is written (and a
            # new row of the same text would break the one-current-row rule).
            return None
        if nearest is not None and nearest.id in self.ended:
            return None  # the next nearest stored fact is not known
        best = nearest
        for row in self.rows:
            if row.id in self.ended:
                continue
            similarity = float(np.dot(row.vector, fact.vector))
            if best is None or similarity > best.similarity:
                best = Stored(row.id, row.text, similarity)
        if (best is not None and best.similarity >= self.duplicate_cosine
                and key_terms(best.text) == key_terms(fact.text)):
            self.ended.add(best.id)
            self.rows.append(_Row(fact.new_id, fact.text, fact.vector))
            return Supersede(best.id, fact)
        self.rows.append(_Row(fact.new_id, fact.text, fact.vector))
        return Add(fact)

"""Plain retrieval baselines for the recall benchmark: BM25, cosine, and their RRF. Pure.

`jin bench recall` ranks a conversation's turns with these beside jin's own recall, over the same
turns and the same vectors, so that each of jin's layers can be judged against what a textbook
retriever does with no layers at all. They are also the reference a test of jin's keyword
ranking can hold it to.

BM25 is Okapi BM25 with Lucene's non-negative idf:

    idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d) = sum over query terms t of
               idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

A query term repeated counts once per occurrence (as a bag of words).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

Item = TypeVar("Item", bound=Hashable)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lowercase words (letters and digits), split at anything else; no stemming, no stopwords."""
    return _WORD.findall(text.lower())


def bm25_scores(query: Sequence[str], docs: Sequence[Sequence[str]], k1: float = 1.2,
                b: float = 0.75, *, unique_lengths: bool = False) -> list[float]:
    """The BM25 score of each document (token lists) for the query's tokens, in docs' order.
    `unique_lengths`: a document's length is its number of distinct tokens, as jin's keyword
    recall counts it (memory/recall_lists.py `bm25_list`)."""
    return BM25(docs, k1, b, unique_lengths=unique_lengths).scores(query)


class BM25:
    """BM25 over a fixed corpus, its statistics computed once for many queries."""

    def __init__(self, docs: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75, *,
                 unique_lengths: bool = False) -> None:
        self.k1, self.b = k1, b
        self.n = len(docs)
        self.counts = [Counter(d) for d in docs]
        lengths = [len(c) if unique_lengths else len(d) for c, d in zip(self.counts, docs,
                                                                          strict=True)]
        avgdl = sum(lengths) / self.n if self.n else 1.0
        self.norms = [k1 * (1 - b + b * n / (avgdl or 1.0)) for n in lengths]
        self.df: Counter[str] = Counter()
        for c in self.counts:
            self.df.update(c.keys())

    def scores(self, query: Sequence[str]) -> list[float]:
        """Each document's score for the query's tokens, in the corpus's order."""
        idf = {t: math.log(1 + (self.n - self.df[t] + 0.5) / (self.df[t] + 0.5))
               for t in set(query)}
        k1 = self.k1
        return [sum(idf[t] * c[t] * (k1 + 1) / (c[t] + norm) for t in query if c[t])
                for c, norm in zip(self.counts, self.norms, strict=True)]


def ranked(scores: Sequence[float], *, keep_zero: bool = True) -> list[int]:
    """Indexes best first; ties in index order. `keep_zero=False` drops scores <= 0 (a BM25
    document with no query word was not retrieved at all)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return order if keep_zero else [i for i in order if scores[i] > 0]


def cosine_scores(query: Sequence[float] | npt.NDArray[np.float32],
                  docs: npt.NDArray[np.float32]) -> list[float]:
    """Cosine similarity of the query vector to each row of `docs` (n x dim)."""
    if len(docs) == 0:
        return []
    q = np.asarray(query, dtype=np.float64)
    m = np.asarray(docs, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
    sims = (m @ q) / np.where(norms == 0, 1.0, norms)
    return [float(s) for s in sims]


def rrf(rankings: Sequence[Sequence[Item]], k: int = 60) -> list[Item]:
    """Reciprocal rank fusion: each item scores sum of 1 / (k + rank) over the lists it is in
    (rank from 1). Best first; ties go to the item first seen, list by list."""
    score: dict[Item, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
    first = {item: n for n, item in enumerate(dict.fromkeys(i for r in rankings for i in r))}
    return sorted(score, key=lambda item: (-score[item], first[item]))

"""The baselines of `jin bench recall`: BM25 against a hand computation, cosine, RRF, and the
recall layers that --ablate switches off."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memory.evaluation.ablations import LAYERS, parse_layers
from memory.evaluation.baselines import BM25, bm25_scores, cosine_scores, ranked, rrf, tokens
from memory.ranking import RecallConfig, recency

DOCS = [["cat", "sat"], ["dog", "sat", "sat"], ["bird"]]  # N = 3, avgdl = 2


def test_bm25_matches_a_hand_computation() -> None:
    idf_cat = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))  # df 1
    idf_sat = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # df 2
    # d0: |d| = avgdl, so the length norm is k1 and tf 1 scores idf * 2.2 / 2.2
    d0 = idf_cat + idf_sat
    # d1: |d| = 3, norm = 1.2 * (0.25 + 0.75 * 3 / 2) = 1.65; tf(sat) = 2
    d1 = idf_sat * 2 * 2.2 / (2 + 1.65)
    scores = bm25_scores(["cat", "sat"], DOCS, k1=1.2, b=0.75)
    assert scores == pytest.approx([d0, d1, 0.0])
    assert scores[0] == pytest.approx(1.45083, abs=1e-5)
    assert scores[1] == pytest.approx(0.56658, abs=1e-5)


def test_bm25_length_normalisation_follows_b() -> None:
    # b = 0: the length does not matter, only tf saturates: 2 * 2.2 / (2 + 1.2)
    idf_sat = math.log(1.6)
    assert bm25_scores(["sat"], DOCS, b=0.0)[1] == pytest.approx(idf_sat * 4.4 / 3.2)
    assert BM25(DOCS).scores(["sat", "bird"]) == bm25_scores(["sat", "bird"], DOCS)
    assert bm25_scores(["x"], []) == []


def test_tokens_are_lowercase_words_of_any_script() -> None:
    assert tokens("We adopted a Tabby-cat, 2 years old!") == [
        "we", "adopted", "a", "tabby", "cat", "2", "years", "old"]
    assert tokens("Ми взяли кошеня з притулку") == ["ми", "взяли", "кошеня", "з", "притулку"]


def test_ranked_drops_documents_without_a_query_word_only_when_asked() -> None:
    assert ranked([0.0, 2.0, 1.0, 2.0]) == [1, 3, 2, 0]
    assert ranked([0.0, 2.0, 1.0, 2.0], keep_zero=False) == [1, 3, 2]


def test_cosine_ignores_length() -> None:
    docs = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 0.0]], dtype=np.float32)
    assert cosine_scores([3.0, 0.0], docs) == pytest.approx([1.0, math.sqrt(0.5), 0.0])


def test_rrf_sums_reciprocal_ranks() -> None:
    # a: 1/61 + 1/63, b: 1/62 + 1/61, c: 1/63, d: 1/62
    assert rrf([["a", "b", "c"], ["b", "d", "a"]], k=60) == ["b", "a", "d", "c"]
    assert rrf([[1, 2], [2, 1]], k=60) == [1, 2]  # a tie goes to the first seen


def test_ablating_recency_makes_an_old_turn_as_fresh_as_a_new_one() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    served = RecallConfig(recency_floor=0.35)  # a deployment that decays
    assert recency(now - timedelta(days=200), now, served) < 0.6
    assert recency(now - timedelta(days=200), now, LAYERS["recency"](served)) == 1.0


def test_each_layer_changes_only_its_own_knobs() -> None:
    served = RecallConfig()
    assert LAYERS["weights"](served) == RecallConfig(fact_weight=1.0, assistant_weight=1.0)
    assert LAYERS["dedupe"](served).duplicate_overlap > 1
    assert LAYERS["fusion-dense"](served).mode == "keyword"
    assert LAYERS["fusion-keyword"](served).mode == "dense"
    assert LAYERS["names"](served) == RecallConfig(name_rows=0)


def test_parse_layers_names_the_known_ones_for_an_unknown_name() -> None:
    assert parse_layers("recency, dedupe,recency") == ("recency", "dedupe")
    with pytest.raises(ValueError, match="unknown recall layer: bogus .known: recency, weights"):
        parse_layers("recency,bogus")
    with pytest.raises(ValueError, match="nothing"):
        parse_layers(",")

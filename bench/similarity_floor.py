"""Recall's relevance floor for each built-in embedder: how similar a question is to its evidence
and to the other turns of its conversation, under MiniLM and under e5.

    .venv/bin/python -m bench.similarity_floor --dataset /tmp/recall.jsonl --dataset /tmp/talk.jsonl

For every question of the datasets (`jin bench recall`'s format), its cosine similarity to each
of its evidence turns and to 50 other turns of its conversation drawn at random (seeded), the
question embedded as a query, the turns as texts, as recall does. Printed per embedder: the
percentiles of both, the share of each that a floor keeps, and the e5 floor that keeps the same
share of unrelated turns as MiniLM's `RecallConfig.min_similarity` (what `E5_MIN_SIMILARITY`
is set from).
"""

from __future__ import annotations

import argparse
import asyncio
import random
from pathlib import Path

import numpy as np

from api.settings import E5_MIN_SIMILARITY
from llm.e5_embedder import E5Embedder
from llm.onnx_embedder import OnnxMiniLM
from llm.ports import Embedder
from memory.evaluation.dataset import Dataset, load_dataset
from memory.ranking import RecallConfig

_OTHERS = 50  # other turns of its conversation drawn for each question
Pairs = list[tuple[int, int, bool]]  # (question, turn, whether the turn is its evidence)


def _pairs(datasets: list[Dataset], seed: int) -> tuple[list[str], list[str], Pairs]:
    """Questions, turns, and (question, turn, is evidence) pairs, over every dataset."""
    rng = random.Random(seed)
    questions: list[str] = []
    turns: list[str] = []
    index: dict[tuple[int, str, str], int] = {}
    pairs: Pairs = []

    def turn(d: int, conversation: str, turn_id: str, content: str) -> int:
        key = (d, conversation, turn_id)
        if key not in index:
            index[key] = len(turns)
            turns.append(content)
        return index[key]

    for d, dataset in enumerate(datasets):
        for question in dataset.questions:
            talk = {t.turn_id: t for t in dataset.conversations[question.conversation_id].turns()}
            q = len(questions)
            questions.append(question.question)
            for e in question.evidence:
                pairs.append((q, turn(d, question.conversation_id, e, talk[e].content), True))
            others = [t for t in talk if t not in question.evidence]
            for o in rng.sample(others, min(_OTHERS, len(others))):
                pairs.append((q, turn(d, question.conversation_id, o, talk[o].content), False))
    return questions, turns, pairs


async def _similarities(embedder: Embedder, questions: list[str], turns: list[str],
                        pairs: Pairs) -> tuple[np.ndarray, np.ndarray]:
    asked = np.array(await embedder.embed_query(questions))
    said = np.array(await embedder.embed(turns))
    sims = np.array([float(asked[q] @ said[t]) for q, t, _ in pairs])
    evidence = np.array([e for _, _, e in pairs])
    return sims[evidence], sims[~evidence]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, action="append", required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    questions, turns, pairs = _pairs([load_dataset(p) for p in args.dataset], args.seed)
    print(f"{len(questions)} questions, {len(turns)} turns, {len(pairs)} pairs\n")
    minilm_floor = RecallConfig().min_similarity
    share = 0.0
    for name, embedder, floor in (("MiniLM", OnnxMiniLM(), minilm_floor),
                                  ("e5", E5Embedder(), E5_MIN_SIMILARITY)):
        evidence, others = asyncio.run(_similarities(embedder, questions, turns, pairs))
        print(f"{name}: evidence p5/p25/p50 {np.percentile(evidence, [5, 25, 50]).round(3)}, "
              f"other turns p25/p50/p75/p95 {np.percentile(others, [25, 50, 75, 95]).round(3)}")
        print(f"  floor {floor}: keeps {(evidence >= floor).mean():.1%} of the evidence and "
              f"{(others >= floor).mean():.1%} of the other turns")
        if name == "MiniLM":
            share = float((others >= floor).mean())
        else:
            matched = float(np.quantile(others, 1 - share))
            print(f"  the floor that keeps MiniLM's share of the other turns: {matched:.3f}")


if __name__ == "__main__":
    main()

"""Plain cosine recall of the built-in e5 embedder with the question reshaped two ways: centred
on the conversation's mean vector, and without the names the conversation is full of.

    .venv/bin/python -m bench.dense_query --dataset /tmp/recall.jsonl --dataset /tmp/talk.jsonl

For every question of the datasets (`jin bench recall`'s format), R@10 of an exact cosine ranking
over its conversation's turns (embedded as texts, the question as a query, as recall does), for:

- `asked`: the question as it is;
- `centred a`: ranked by the turns' inner product with `q - a * mean`, the mean of the
  conversation's turn vectors. For a fixed question this orders the turns as the centred
  similarity `(q - mean) . (t - mean)` does at a = 1; centring takes off what every turn of the
  conversation shares (the turns near everything, "hubs", are found for every question);
- `no names`: the question without its capitalised words (not its first, nor "I") that appear in
  at least `--name-rows` of the conversation's turns: the speakers' names, which the greetings
  of a two-person chat carry ("Hi Anna, long time!") and the turns that answer a question about
  Anna do not ("I turn thirty on the 23rd").

A probe of where dense recall loses, for the served ranking to learn from; it changes nothing
served. Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path

import numpy as np

from llm.e5_embedder import E5Embedder
from memory.evaluation.dataset import load_dataset
from memory.indexer import MAX_CHARS
from memory.recall_store import name_words, without_words

ALPHAS = (0.25, 0.5, 0.75, 1.0)
_WORD = re.compile(r"\w+")


def recall_at(scores: np.ndarray, ids: list[str], evidence: tuple[str, ...], k: int = 10) -> float:
    top = {ids[i] for i in np.argsort(-scores, kind="stable")[:k]}
    return len(top & set(evidence)) / len(evidence)


def without_names(question: str, rows: list[set[str]], at_least: int) -> str:
    """The question without its names (as recall picks them) that `at_least` of the rows hold
    (counted by lowercase words here, by full text in recall)."""
    held = [w for w in name_words(question) if sum(w.lower() in row for row in rows) >= at_least]
    return without_words(question, held) or question


async def probe(path: Path, embedder: E5Embedder, at_least: int) -> dict[str, float]:
    data = load_dataset(path)
    figures: dict[str, list[float]] = {}
    for conversation in data.conversations.values():
        turns = conversation.turns()
        questions = [q for q in data.questions if q.conversation_id == conversation.conversation_id
                     and q.evidence]
        if not turns or not questions:
            continue
        ids = [t.turn_id for t in turns]
        vectors = np.asarray(await embedder.embed([t.content[:MAX_CHARS] for t in turns]))
        mean = vectors.mean(axis=0)
        rows = [set(_WORD.findall(t.content.lower())) for t in turns]
        asked = np.asarray(await embedder.embed_query([q.question for q in questions]))
        plain = np.asarray(await embedder.embed_query(
            [without_names(q.question, rows, at_least) for q in questions]))
        for q, qv, pv in zip(questions, asked, plain, strict=True):
            figures.setdefault("asked", []).append(recall_at(vectors @ qv, ids, q.evidence))
            for a in ALPHAS:
                figures.setdefault(f"centred {a}", []).append(
                    recall_at(vectors @ (qv - a * mean), ids, q.evidence))
            figures.setdefault("no names", []).append(recall_at(vectors @ pv, ids, q.evidence))
    return {name: float(np.mean(values)) for name, values in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, action="append", required=True)
    parser.add_argument("--name-rows", type=int, default=4,
                        help="turns of the conversation a capitalised word must be in to be "
                             "left out as a name")
    args = parser.parse_args()
    embedder = E5Embedder(threads=1)
    print(f"cosine R@10 ({embedder.name}), exact ranking over each conversation's turns")
    for path in args.dataset:
        figures = asyncio.run(probe(path, embedder, args.name_rows))
        print(f"{path.name}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()),
              flush=True)


if __name__ == "__main__":
    main()

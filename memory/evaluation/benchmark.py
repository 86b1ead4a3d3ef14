"""`jin bench recall --dataset FILE.jsonl`: Recall@k and NDCG@10 through jin's real paths.

Every conversation is ingested as one user, each session as one chat of that user, through the
chat store's import (the rows and their recall queue entries in one statement) and the indexer
that serving workers run. Each question is then asked through the recall path a step uses
(PostgresRecall: embed the query, the hybrid statement, ranking), as of the question's
`asked_at`. A dataset's facts (what a memory flush would have drawn from their source turns)
are written through the fact store, with those turns' messages as sources and the facts' own
times; a fact in the results is not a turn, so it never counts as evidence (the message it
expands does). Data goes under a tenant of its own, removed at the end unless `keep`.

Beside jin's modes, in the same run: plain baselines over the same turns of each conversation
(every turn of the user, which is what jin's recall can see), BM25 on their words and cosine on
the vectors jin stored for them, and the RRF of the two (memory/evaluation/baselines.py); and
jin with one layer switched off a row (`ablate`, memory/evaluation/ablations.py). A table of all
rows ends the report.

The caller builds the engine and the embedder (api/cli.py); this module measures.

    jin bench recall --dataset data.jsonl --mode all --ablate recency,weights --out run.jsonl
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import connect, fetch
from llm.ports import Embedder, Embedding
from llm.tokens import TiktokenCounter
from memory.evaluation.ablations import LAYERS
from memory.evaluation.baselines import BM25, cosine_scores, ranked, rrf, tokens
from memory.evaluation.dataset import Dataset, load_dataset
from memory.evaluation.scores import (
    QuestionRun,
    Summary,
    aggregate,
    format_report,
    format_table,
    write_run,
)
from memory.indexer import Indexer
from memory.ranking import Mode, RecallConfig, RecallQuery
from memory.recall_store import PostgresRecall
from memory.store import PostgresFactStore

MODES: tuple[Mode, ...] = ("hybrid", "dense", "keyword")


class Ingest(Protocol):
    """Writes a dataset's sessions as chats (the caller's: memory/ knows no chats)."""

    async def __call__(
        self, dataset: Dataset, tenant: str, progress: Progress
    ) -> dict[uuid.UUID, str]:
        """Every session as a chat of its conversation's user, in `tenant`; returns each
        written message's id -> its turn id."""
        ...


class Progress(Protocol):
    """How far a long phase has come, shown to the person running the benchmark."""

    def advance(self, n: int) -> None:
        """n more items done."""

    def close(self) -> None:
        """The phase is over."""


@dataclass(frozen=True)
class Plan:
    """What to measure: the dataset file, the recall modes, where run files go."""

    dataset: str
    mode: Mode | Literal["all"] = "hybrid"
    out: str | None = None  # a run file per mode, baseline (run.bm25.jsonl) and ablation
    keep: bool = False  # leave the ingested tenant in the database
    ablate: tuple[str, ...] = ()  # names of LAYERS, each switched off in a run of its own


async def _index(indexer: Indexer, progress: Progress) -> float:
    started = time.perf_counter()
    while n := await indexer.drain_once():
        progress.advance(n)
    progress.close()
    return time.perf_counter() - started


async def _ask(
    recall: PostgresRecall, dataset: Dataset, tenant: str, turn_of: dict[uuid.UUID, str],
    config: RecallConfig,
) -> tuple[list[QuestionRun], float]:
    rows: list[QuestionRun] = []
    started = time.perf_counter()
    for question in dataset.questions:
        asked = time.perf_counter()
        result = await recall.recall(RecallQuery(tenant, question.conversation_id,
                                                 question.question, now=question.asked_at),
                                     config)
        latency = time.perf_counter() - asked
        results = [turn_of[item.id] for item in result.items if item.id in turn_of]
        rows.append(QuestionRun.of(question, results, latency))
    return rows, time.perf_counter() - started


_OWNERS = text("SELECT message_id, user_id FROM message_embeddings WHERE tenant_id = :t")
# A fact as of the time the flush would have written it (the fact store stamps now()).
_DATED = text("UPDATE memories SET created_at = :at, valid_from = :at, updated_at = :at "
              "WHERE id = :id")


async def _remember(
    engine: AsyncEngine, embedder: Embedder, embedder_name: str, dataset: Dataset,
    tenant: str, turn_of: dict[uuid.UUID, str],
) -> int:
    """Write the dataset's facts, oldest first, as the memory flush would; how many."""
    if not dataset.facts:
        return 0
    async with connect(engine) as conn:
        owners = await fetch(conn, _OWNERS, {"t": tenant})
    message_of = {(row["user_id"], turn_of[row["message_id"]]): row["message_id"]
                  for row in owners if row["message_id"] in turn_of}
    store = PostgresFactStore(engine, embedder, embedder_name)
    for fact in sorted(dataset.facts, key=lambda f: f.created_at):
        cid = fact.conversation_id
        sources = [message_of[(cid, turn)] for turn in fact.sources]
        written = await store.write(tenant, cid, [fact.text], sources, origin="flush")
        async with connect(engine) as conn:
            for w in written:
                await fetch(conn, _DATED, {"at": fact.created_at, "id": w.id})
    return len(dataset.facts)


TOP = 20  # results scored per question, for jin and the baselines alike
_VECTORS = """SELECT message_id, user_id, embedding FROM message_embeddings
              WHERE tenant_id = :t AND embedding IS NOT NULL"""


@dataclass(frozen=True)
class _Corpus:
    """One conversation's turns as the baselines see them."""

    turn_ids: list[str]
    bm25: BM25
    vectors: npt.NDArray[np.float32]


async def _corpora(
    engine: AsyncEngine, dataset: Dataset, tenant: str, turn_of: dict[uuid.UUID, str], dim: int,
) -> dict[str, _Corpus]:
    """Each conversation's turns, their words and the vectors jin stored for them (a turn
    without one, which the indexer gave up on, gets zeros: last for cosine, as for jin)."""
    async with connect(engine) as conn:
        rows = await fetch(conn, text(_VECTORS), {"t": tenant})
    stored = {(row["user_id"], turn_of[row["message_id"]]): row["embedding"].to_numpy()
              for row in rows if row["message_id"] in turn_of}  # pgvector's Vector
    zeros = np.zeros(dim, dtype=np.float32)
    corpora = {}
    for cid, conversation in dataset.conversations.items():
        turns = conversation.turns()
        vectors = [np.asarray(stored.get((cid, t.turn_id), zeros), dtype=np.float32)
                   for t in turns]
        corpora[cid] = _Corpus([t.turn_id for t in turns],
                               BM25([tokens(t.content) for t in turns]), np.stack(vectors))
    return corpora


async def _baselines(
    engine: AsyncEngine, embedder: Embedder, dataset: Dataset, tenant: str,
    turn_of: dict[uuid.UUID, str],
) -> dict[str, tuple[list[QuestionRun], float]]:
    """BM25, cosine and RRF(k=60) of the two, per question over its conversation's turns; each
    run with the sum of its questions' times (the query vectors, embedded in batches, aside)."""
    corpora = await _corpora(engine, dataset, tenant, turn_of, embedder.dim)
    texts = [q.question for q in dataset.questions]
    vectors: list[Embedding] = []
    for start in range(0, len(texts), 64):
        vectors += await embedder.embed_query(texts[start:start + 64])
    runs: dict[str, tuple[list[QuestionRun], float]] = {
        name: ([], 0.0) for name in ("bm25", "cosine", "rrf(bm25,cosine)")}
    for question, vector in zip(dataset.questions, vectors, strict=True):
        corpus = corpora[question.conversation_id]
        t0 = time.perf_counter()
        by_words = ranked(corpus.bm25.scores(tokens(question.question)), keep_zero=False)
        t1 = time.perf_counter()
        by_meaning = ranked(cosine_scores(vector, corpus.vectors))
        t2 = time.perf_counter()
        fused = rrf([by_words, by_meaning], k=60)
        t3 = time.perf_counter()
        timed = (("bm25", by_words, t1 - t0), ("cosine", by_meaning, t2 - t1),
                 ("rrf(bm25,cosine)", fused, t3 - t0))
        for name, order, seconds in timed:
            rows, wall = runs[name]
            rows.append(QuestionRun.of(question, [corpus.turn_ids[i] for i in order[:TOP]],
                                       seconds))
            runs[name] = (rows, wall + seconds)
    return runs


@dataclass(frozen=True)
class Fence:
    """The fence as a step would get it (the served cut: tokens and items), over the questions:
    what share of its items are evidence, how much of the evidence it holds, its size."""

    precision: float  # evidence items / items, over the questions whose fence is not empty
    recall: float  # evidence turns in the fence / evidence turns
    items: float
    tokens: float
    empty: int
    questions: int

    def line(self, config: RecallConfig) -> str:
        return (f"fence as served ({config.mode}, {config.budget_tokens} tokens, "
                f"{config.max_items} items): precision {self.precision:.3f}, recall "
                f"{self.recall:.3f}, {self.items:.1f} items and {self.tokens:.0f} tokens a "
                f"question, {self.empty} of {self.questions} empty")


async def _fence(
    recall: PostgresRecall, dataset: Dataset, tenant: str, turn_of: dict[uuid.UUID, str],
    config: RecallConfig,
) -> Fence:
    precision, found, items, tokens = [], [], [], []
    for question in dataset.questions:
        result = await recall.recall(RecallQuery(tenant, question.conversation_id,
                                                 question.question, now=question.asked_at),
                                     config)
        got = [turn_of.get(item.id) for item in result.items]
        evidence = set(question.evidence)
        hits = [g for g in got if g in evidence]
        if got:
            precision.append(len(hits) / len(got))
        found.append(len(set(hits)) / len(evidence))
        items.append(len(got))
        tokens.append(sum(item.tokens for item in result.items))
    n = max(len(dataset.questions), 1)
    return Fence(sum(precision) / max(len(precision), 1), sum(found) / n, sum(items) / n,
                 sum(tokens) / n, len(dataset.questions) - len(precision),
                 len(dataset.questions))


def _out_path(out: str, mode: str, several: bool) -> Path:
    path = Path(out)
    return path.with_name(f"{path.stem}.{mode}{path.suffix}") if several else path


def _report(name: str, rows: list[QuestionRun], wall: float, out: str | None, label: str, *,
            several: bool) -> Summary:
    """Print one run's report, write its run file when asked; its summary, for the table."""
    summary = aggregate(rows, max(wall, 1e-9))
    print(format_report(summary, title=f"recall, {name}"))
    if out:
        write_run(_out_path(out, label, several), rows)
    return summary


async def run_recall_benchmark(
    plan: Plan, engine: AsyncEngine, ingest: Ingest, embedder: Embedder,
    embedder_name: str, config: RecallConfig, progress: Callable[[str, int], Progress],
) -> int:
    """Ingest, index, ask; print a report per baseline, mode and ablation, then the table of
    all. Returns the exit status (0)."""
    dataset = load_dataset(plan.dataset)
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        counter = TiktokenCounter()
        sessions = sum(len(c.sessions) for c in dataset.conversations.values())
        turn_of = await ingest(dataset, tenant, progress("ingest sessions", sessions))
        index_s = await _index(Indexer(engine, embedder, embedder_name),
                               progress("index messages", len(turn_of)))
        facts = await _remember(engine, embedder, embedder_name, dataset, tenant, turn_of)
        print(f"dataset {plan.dataset}: {len(dataset.conversations)} conversations, "
              f"{len(turn_of)} turns, {facts} facts, {len(dataset.questions)} questions; embedder "
              f"{embedder_name}; indexed in {index_s:.1f} s "
              f"({len(turn_of) / max(index_s, 1e-9):.0f} messages/s)")
        # The whole ranked list, up to 20, is scored: no token cut for a benchmark.
        base = replace(config, max_items=TOP, budget_tokens=10**9,
                       candidates=max(config.candidates, 40))
        recall = PostgresRecall(engine, embedder, counter.count, base)
        modes: list[Mode] = list(MODES[::-1]) if plan.mode == "all" else [plan.mode]
        served: Mode = config.mode if plan.mode == "all" else plan.mode
        runs: list[tuple[str, str, RecallConfig]] = [
            (f"jin {mode}", mode, replace(base, mode=mode)) for mode in modes]
        runs += [(f"jin {served} -{layer}", f"{served}-{layer}",
                  LAYERS[layer](replace(base, mode=served))) for layer in plan.ablate]
        table: list[tuple[str, Summary]] = []
        baselines = await _baselines(engine, embedder, dataset, tenant, turn_of)
        for (name, (rows, wall)), label in zip(baselines.items(), ("bm25", "cosine", "rrf"),
                                               strict=True):
            table.append((name, _report(name, rows, wall, plan.out, label, several=True)))
        for name, label, cfg in runs:
            rows, wall = await _ask(recall, dataset, tenant, turn_of, cfg)
            table.append((name, _report(name, rows, wall, plan.out, label,
                                        several=len(runs) > 1)))
        print(format_table(table))
        served_config = replace(config, mode=served)
        fence = await _fence(PostgresRecall(engine, embedder, counter.count, served_config),
                             dataset, tenant, turn_of, served_config)
        print(fence.line(served_config))
        return 0
    finally:
        if not plan.keep:
            async with engine.begin() as conn:  # messages and their vectors go with the chats
                await conn.execute(text("DELETE FROM chats WHERE tenant_id = :t"), {"t": tenant})
                await conn.execute(text("DELETE FROM memories WHERE tenant_id = :t"),
                                   {"t": tenant})

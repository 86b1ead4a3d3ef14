"""`jin bench recall --dataset FILE.jsonl`: Recall@k and NDCG@10 through jin's real paths.

Every conversation is ingested as one user, each session as one chat of that user, through the
chat store's import (the rows and their recall queue entries in one statement) and the indexer
that serving workers run. Each question is then asked through the recall path a step uses
(PostgresRecall: embed the query, the hybrid statement, ranking), as of the question's
`asked_at`. Data goes under a tenant of its own, removed at the end unless `keep`.

The caller builds the engine and the embedder (api/cli.py); this module measures.

    jin bench recall --dataset data.jsonl --mode all --out run.jsonl
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from llm.ports import Embedder
from llm.tokens import TiktokenCounter
from memory.evaluation.dataset import Dataset, load_dataset
from memory.evaluation.scores import QuestionRun, aggregate, format_report, write_run
from memory.indexer import Indexer
from memory.ranking import Mode, RecallConfig, RecallQuery
from memory.recall_store import PostgresRecall

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
    out: str | None = None  # a run file per mode when several
    keep: bool = False  # leave the ingested tenant in the database


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


def _out_path(out: str, mode: str, several: bool) -> Path:
    path = Path(out)
    return path.with_name(f"{path.stem}.{mode}{path.suffix}") if several else path


async def run_recall_benchmark(
    plan: Plan, engine: AsyncEngine, ingest: Ingest, embedder: Embedder,
    embedder_name: str, config: RecallConfig, progress: Callable[[str, int], Progress],
) -> int:
    """Ingest, index, ask; print a report per mode. Returns the exit status (0)."""
    dataset = load_dataset(plan.dataset)
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        counter = TiktokenCounter()
        sessions = sum(len(c.sessions) for c in dataset.conversations.values())
        turn_of = await ingest(dataset, tenant, progress("ingest sessions", sessions))
        index_s = await _index(Indexer(engine, embedder, embedder_name),
                               progress("index messages", len(turn_of)))
        print(f"dataset {plan.dataset}: {len(dataset.conversations)} conversations, "
              f"{len(turn_of)} turns, {len(dataset.questions)} questions; embedder "
              f"{embedder_name}; indexed in {index_s:.1f} s "
              f"({len(turn_of) / max(index_s, 1e-9):.0f} messages/s)")
        # The whole ranked list, up to 20, is scored: no token cut for a benchmark.
        base = replace(config, max_items=20, budget_tokens=10**9,
                       candidates=max(config.candidates, 40))
        recall = PostgresRecall(engine, embedder, counter.count, base)
        modes: list[Mode] = list(MODES[::-1]) if plan.mode == "all" else [plan.mode]
        for mode in modes:
            rows, wall = await _ask(recall, dataset, tenant, turn_of, replace(base, mode=mode))
            print(format_report(aggregate(rows, wall), title=f"recall, {mode}"))
            if plan.out:
                write_run(_out_path(plan.out, mode, len(modes) > 1), rows)
        return 0
    finally:
        if not plan.keep:
            async with engine.begin() as conn:  # messages and their vectors go with the chats
                await conn.execute(text("DELETE FROM chats WHERE tenant_id = :t"), {"t": tenant})

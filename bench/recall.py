"""`jin bench recall --dataset FILE.jsonl`: Recall@k and NDCG@10 through jin's real paths.

Every conversation is ingested as one user, each session as one chat of that user, through the
chat store's import (the rows and their recall queue entries in one statement) and the indexer
that serving workers run. Each question is then asked through the recall path a step uses
(PostgresRecall: embed the query, the hybrid statement, ranking), as of the question's
`asked_at`. Data goes under a tenant of its own, removed at the end unless --keep.

    jin bench recall --dataset data.jsonl --mode all --out run.jsonl
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

from sqlalchemy import text

from api.embedders import build_embedder
from api.reindex import Progress
from api.settings import Settings
from bench.recall_metrics import (
    Dataset,
    QuestionRun,
    aggregate,
    format_report,
    load_dataset,
    write_run,
)
from chat.ports import ImportedMessage, NewChat
from chat.store import PostgresChatStore
from chat.types import ModelSettings
from db.engine import create_engine
from llm.openai import new_session
from llm.tokens import TiktokenCounter
from memory.indexer import Indexer
from memory.recall import RecallConfig
from memory.search import PostgresRecall


async def _ingest(
    chats: PostgresChatStore, dataset: Dataset, tenant: str, counter: TiktokenCounter
) -> dict[uuid.UUID, str]:
    """Every session as a chat of its conversation's user; returns message id -> turn id."""
    turn_of: dict[uuid.UUID, str] = {}
    sessions = sum(len(c.sessions) for c in dataset.conversations.values())
    progress = Progress("ingest sessions", sessions, sys.stderr)
    for conversation in dataset.conversations.values():
        for session in conversation.sessions:
            chat = await chats.create_chat(NewChat(
                tenant_id=tenant, user_id=conversation.conversation_id,
                title=session.session_id, system_prompt="", settings=ModelSettings(),
                busy_policy="queue",
            ))
            rows = [ImportedMessage(t.role, t.content, counter.count(t.content), t.created_at)
                    for t in session.turns]
            ids = await chats.import_messages(tenant, chat.id, rows)
            assert ids is not None, "a fresh chat takes its import"
            turn_of.update(zip(ids, (t.turn_id for t in session.turns), strict=True))
            progress.advance(1)
    progress.close()
    return turn_of


async def _index(indexer: Indexer, total: int) -> float:
    started = time.perf_counter()
    progress = Progress("index messages", total, sys.stderr)
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
        result = await recall.recall(tenant, question.conversation_id, question.question,
                                     now=question.asked_at, config=config)
        latency = time.perf_counter() - asked
        results = [turn_of[item.id] for item in result.items if item.id in turn_of]
        rows.append(QuestionRun.of(question, results, latency))
    return rows, time.perf_counter() - started


def _out_path(out: str, mode: str, several: bool) -> Path:
    path = Path(out)
    return path.with_name(f"{path.stem}.{mode}{path.suffix}") if several else path


async def run_recall_bench(settings: Settings, url: str, args: argparse.Namespace) -> int:
    dataset = load_dataset(args.dataset)
    tenant = f"bench-{uuid.uuid4().hex[:8]}"
    engine = create_engine(url, pool_size=2)
    http = new_session(connect_timeout=settings.provider_connect_timeout,
                       read_timeout=settings.provider_read_timeout)
    try:
        embedder, provider = build_embedder(settings, http)
        counter = TiktokenCounter()
        turn_of = await _ingest(PostgresChatStore(engine), dataset, tenant, counter)
        index_s = await _index(Indexer(engine, embedder, provider.model), len(turn_of))
        print(f"dataset {args.dataset}: {len(dataset.conversations)} conversations, "
              f"{len(turn_of)} turns, {len(dataset.questions)} questions; embedder "
              f"{provider.model}; indexed in {index_s:.1f} s "
              f"({len(turn_of) / max(index_s, 1e-9):.0f} messages/s)")
        base = settings.recall_config()
        # The whole ranked list, up to 20, is scored: no token cut for a benchmark.
        base = replace(base, max_items=20, budget_tokens=10**9, candidates=max(base.candidates, 40))
        recall = PostgresRecall(engine, embedder, counter.count, base)
        modes = ["keyword", "dense", "hybrid"] if args.mode == "all" else [args.mode]
        for mode in modes:
            rows, wall = await _ask(recall, dataset, tenant, turn_of, replace(base, mode=mode))
            print(format_report(aggregate(rows, wall), title=f"recall, {mode}"))
            if args.out:
                write_run(_out_path(args.out, mode, len(modes) > 1), rows)
        return 0
    finally:
        if not args.keep:
            async with engine.begin() as conn:  # messages and their vectors go with the chats
                await conn.execute(text("DELETE FROM chats WHERE tenant_id = :t"), {"t": tenant})
        await http.close()
        await engine.dispose()

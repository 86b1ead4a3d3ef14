"""`jin import FILE --user U`: conversations from elsewhere become the user's chats, recallable.

Two phases, each with its progress shown. Writing: each conversation of the file
(api/import_formats.py) is written as a chat through chat/importer.py, its messages queued for
recall as backfill, behind live messages. Indexing: the recall queue is drained at the embedder's
pace (Indexer.backfill), by this process, at a lower priority than serving workers
(JIN_IMPORT_NICE), which help when their steps are quiet.

Stopped at any point, the next run of the same command goes on where it stopped: what was written
is found by its external ids and not written again, and what waits to be indexed waits in
Postgres. Lines that cannot be read are reported with their numbers; the rest is imported.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from api.embedders import build_embedder, embedder_server
from api.import_formats import BadLine, Format, detect, parse
from api.reindex import Progress
from api.settings import Settings
from chat.importer import ChatMoved, ImportedConversation, Written, write_conversation
from chat.ports import ChatStore
from chat.store import PostgresChatStore
from db.engine import create_engine
from llm.ports import TokenCounter
from llm.tokens import TiktokenCounter
from memory.evaluation.benchmark import Progress as Shown
from memory.indexer import Indexer


@dataclass
class ImportReport:
    """What a run did; `jin import` prints it as JSON."""

    file: str
    format: str
    conversations: int = 0
    chats_created: int = 0
    messages_written: int = 0
    messages_already_there: int = 0
    bad_lines: list[str] = field(default_factory=list)
    indexed: int = 0
    write_seconds: float = 0.0
    index_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "bad_lines": len(self.bad_lines),
                "write_seconds": round(self.write_seconds, 2),
                "index_seconds": round(self.index_seconds, 2)}


def lower_priority(nice: int) -> None:
    """This process, and the threads it starts from now on (the embedder's), at `nice`."""
    if nice > 0 and hasattr(os, "nice"):
        os.nice(nice)


async def write_file(
    chats: ChatStore, counter: TokenCounter, tenant: str, user: str, text: str, name: str,
    fmt: Format | None, out: TextIO, progress: Shown | None = None,
) -> ImportReport:
    """Write the conversations of a file's text as chats of `user` (the writing phase). Bad
    lines are reported on `out` as they are met."""
    chosen = fmt or detect(text)
    report = ImportReport(name, chosen)
    started = time.perf_counter()
    conversations: list[ImportedConversation] = []
    for item in parse(text, chosen, datetime.now(UTC)):
        if isinstance(item, BadLine):
            report.bad_lines.append(str(item))
            out.write(f"{name}: {item}\n")
        else:
            conversations.append(item)
    report.conversations = len(conversations)
    bar = progress or Progress("conversations", len(conversations), out)
    for conversation in conversations:
        written = await _written(chats, counter, tenant, user, conversation)
        report.chats_created += written.new_chat
        report.messages_written += len(written.messages)
        report.messages_already_there += len(conversation.turns) - len(written.messages)
        bar.advance(1)
    bar.close()
    report.write_seconds = time.perf_counter() - started
    return report


# A conversation whose chat took rows from elsewhere meanwhile is written again, this many
# times at most: a chat someone is busy talking in can keep moving.
WRITE_TRIES = 5


async def _written(chats: ChatStore, counter: TokenCounter, tenant: str, user: str,
                   conversation: ImportedConversation) -> Written:
    for _ in range(WRITE_TRIES - 1):
        try:
            return await write_conversation(chats, counter, tenant, user, conversation)
        except ChatMoved:  # a step on it meanwhile (someone is already talking there): again
            await asyncio.sleep(0.2)
    return await write_conversation(chats, counter, tenant, user, conversation)


async def index_queue(indexer: Indexer, out: TextIO) -> tuple[int, float]:
    """Drain the recall queue (the indexing phase) until no backfill waits; (messages indexed
    here, seconds). Serving workers may index some of it meanwhile."""
    started = time.perf_counter()
    bar = Progress("indexing", await indexer.pending(), out)
    indexed, told = 0, False
    while True:
        indexed += await indexer.backfill(bar.advance)
        if not (left := await indexer.pending(backfill_only=True)):
            break
        # What is left is claimed: by a serving worker (done in a moment), or by a run that
        # was stopped (its claim expires after JIN_INDEXER_CLAIM_SECONDS).
        if not told:
            out.write(("\n" if bar.tty else "") + f"indexing: waiting for {left} messages "
                      "another process has claimed (a serving worker, or a stopped run whose "
                      "claim ends within JIN_INDEXER_CLAIM_SECONDS)\n")
            out.flush()
            told = True
        await asyncio.sleep(0.5)
    bar.close()
    return indexed, time.perf_counter() - started


async def run_import(
    settings: Settings, url: str, text: str, name: str, *, user: str, tenant: str,
    fmt: Format | None = None, index: bool = True, out: TextIO | None = None,
) -> ImportReport:
    """`jin import`: write a file's text (`name`: the file, for reports), then index what
    waits (unless not `index`). Progress and bad lines go to `out` (stderr)."""
    out = out or sys.stderr
    engine = create_engine(url, pool_size=3)
    server = embedder_server(settings) if index else None
    try:
        report = await write_file(PostgresChatStore(engine), TiktokenCounter(), tenant, user,
                                  text, name, fmt, out)
        if index:
            embedder, provider = build_embedder(settings, server)
            indexer = Indexer(engine, embedder, provider.model, settings.indexer_config())
            report.indexed, report.index_seconds = await index_queue(indexer, out)
        return report
    finally:
        if server is not None:
            await server.aclose()
        await engine.dispose()

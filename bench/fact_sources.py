"""Which messages a fact written by the memory flush names as its sources, against the turn it
truly came from.

    .venv/bin/python -m bench.recall_conversations --out /tmp/talk-s.jsonl --seed 0 \
        --fact-sources session
    .venv/bin/python -m bench.recall_conversations --out /tmp/talk-f.jsonl --seed 0 \
        --fact-sources turn
    .venv/bin/python bench/fact_sources.py --written /tmp/talk-s.jsonl --truth /tmp/talk-f.jsonl

`--written` gives each fact the messages the flush read (its whole session); `--truth` is the
same set with each fact sourced from the one turn that said it (the generator draws the same
turns and facts for a seed). Each session is imported as a chat and each fact written through
the fact store, as the flush writes it; the sources the store keeps (memory/facts.py
`drawn_from`) are then compared with the true turn. Prints how many facts name their turn alone,
name it among a few, fall back to the whole span, or name other turns only.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import uuid
from collections import Counter
from pathlib import Path

from api.database import migrate
from chat.ports import ImportedMessage, NewChat
from chat.store import PostgresChatStore
from chat.types import ModelSettings
from db.engine import create_engine
from llm.onnx_embedder import OnnxMiniLM
from memory.evaluation.dataset import Dataset, load_dataset
from memory.facts import DRAWN_MOST
from memory.store import PostgresFactStore


async def measure(url: str, written: Dataset, truth: Dataset) -> None:
    engine = create_engine(url, pool_size=2)
    tenant = f"sources-{uuid.uuid4().hex[:8]}"
    try:
        chats = PostgresChatStore(engine)
        message_of: dict[tuple[str, str], uuid.UUID] = {}
        for conversation in written.conversations.values():
            for session in conversation.sessions:
                chat = await chats.create_chat(NewChat(
                    tenant, conversation.conversation_id, "", "", ModelSettings(), "queue"))
                ids = await chats.import_messages(tenant, chat.id, [
                    ImportedMessage(t.role, t.content, len(t.content.split()), t.created_at)
                    for t in session.turns])
                assert ids is not None
                for turn, message in zip(session.turns, ids, strict=True):
                    message_of[(conversation.conversation_id, turn.turn_id)] = message
        store = PostgresFactStore(engine, OnnxMiniLM(), "minilm")
        true_of = {(f.conversation_id, f.text): set(f.sources) for f in truth.facts}
        outcome: Counter[str] = Counter()
        kept: list[int] = []
        read: list[int] = []
        for fact in written.facts:
            cid = fact.conversation_id
            sources = [message_of[(cid, turn)] for turn in fact.sources]
            [w] = await store.write(tenant, cid, [fact.text], sources, origin="flush")
            stored = await store.get(tenant, cid, w.id)
            assert stored is not None
            names = set(stored.sources)
            true = {message_of[(cid, turn)] for turn in true_of[(cid, fact.text)]}
            kept.append(len(names))
            read.append(len(sources))
            if len(names) == len(set(sources)) and len(sources) > DRAWN_MOST:
                outcome["the whole span (no message holds enough of it)"] += 1
            elif names == true:
                outcome["its turn alone"] += 1
            elif true <= names:
                outcome["its turn among others"] += 1
            else:
                outcome["other turns only"] += 1
        n = len(written.facts)
        print(f"{n} facts, each written from {statistics.mean(read):.1f} messages (its session); "
              f"sources kept: {statistics.mean(kept):.2f} a fact on average")
        for name in ("its turn alone", "its turn among others",
                     "the whole span (no message holds enough of it)", "other turns only"):
            print(f"  {name:48} {outcome[name]:4}  {outcome[name] / n:6.1%}")
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--written", type=Path, required=True, help="facts sourced from spans")
    parser.add_argument("--truth", type=Path, required=True, help="the same, from their turns")
    parser.add_argument("--datadir", type=Path, default=Path("/tmp/jin_sources_pg"))
    args = parser.parse_args()
    import pgserver

    server = pgserver.get_server(args.datadir, cleanup_mode=None)
    url = server.get_uri()
    migrate(url)
    asyncio.run(measure(url, load_dataset(args.written), load_dataset(args.truth)))


if __name__ == "__main__":
    main()

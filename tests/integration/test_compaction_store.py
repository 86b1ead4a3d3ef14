"""Compaction against real Postgres: one row per span under concurrency, and facts that survive
20 passes of a helper that drops lines at random."""

from __future__ import annotations

import asyncio
import random
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.ports import FinishedStep, NewChat, Opened, OpenStep
from chat.steps import PostgresStepStore
from chat.store import PostgresChatStore
from chat.types import Chat, ModelSettings
from llm.onnx_embedder import OnnxMiniLM
from llm.tokens import TiktokenCounter
from llm.types import CompletionRequest, ContentDelta, Delta, Finish
from memory.store import PostgresFactStore
from orchestrator.compaction_pass import Compactor
from orchestrator.compaction_policy import KEPT, SECTIONS, CompactionPolicy, sections_of

COUNTER = TiktokenCounter()


class LossyHelper:
    """A helper that merges honestly but drops each line with some probability (seeded)."""

    def __init__(self, drop: float, seed: int = 7, barrier: asyncio.Barrier | None = None,
                 previous: bool = True):
        self.drop, self.random, self.calls = drop, random.Random(seed), 0
        self.barrier = barrier
        self.previous = previous  # False: it summarises the new messages alone

    async def stream(self, request: CompletionRequest) -> AsyncIterator[Delta]:
        self.calls += 1
        if self.barrier is not None:
            await self.barrier.wait()  # both workers have read the chat before either writes
        prompt = request.messages[-1].content
        previous = re.search(r"<previous-summary>\n(.*?)\n</previous-summary>", prompt, re.S)
        messages = re.search(r"<messages>\n(.*?)\n</messages>", prompt, re.S)
        lines = [ln for ln in (previous.group(1) if previous and self.previous else "")
                 .splitlines() if ln.startswith("- ") and ln != "- (none)"]
        lines += [f"- {ln}" for ln in (messages.group(1) if messages else "").splitlines()]
        kept = [ln for ln in lines if self.random.random() >= self.drop]
        body = {s: ["- (none)"] for s in SECTIONS}
        body["Facts"] = kept or ["- (none)"]
        yield ContentDelta("\n\n".join(f"## {s}\n" + "\n".join(v) for s, v in body.items()))
        yield Finish("stop")


async def _new_chat(engine: AsyncEngine) -> tuple[PostgresChatStore, PostgresStepStore, Chat]:
    chats = PostgresChatStore(engine)
    chat = await chats.create_chat(NewChat("t", "u", "", "", ModelSettings(), "queue"))
    return chats, PostgresStepStore(engine), chat


async def _turn(steps: PostgresStepStore, chat: Chat, question: str, answer: str) -> None:
    opened = await steps.open(OpenStep(
        tenant_id="t", chat_id=chat.id, step_id=uuid.uuid4(), content=question,
        token_count=COUNTER.count(question), idempotency_key=None, worker="w", lease_ttl=30,
        window_rows=10, window_budget=100, one_statement=False,
    ))
    assert isinstance(opened, Opened)
    await steps.finish(chat.id, opened.begun, FinishedStep(
        status="complete", content=answer, reasoning="", token_count=COUNTER.count(answer),
        usage=None, error_code=None, timings={}))


async def test_two_workers_compacting_the_same_chat_write_one_summary_row(
    engine: AsyncEngine,
) -> None:
    chats, steps, chat = await _new_chat(engine)
    for i in range(10):
        await _turn(steps, chat, f"question {i} about LCK-{i:04d}", f"answer {i}")
    chat = await chats.get_chat("t", chat.id)
    assert chat is not None
    barrier = asyncio.Barrier(2)
    workers = [
        Compactor(chats, LossyHelper(0.0, barrier=barrier), "lossy", COUNTER) for _ in range(2)
    ]
    results = await asyncio.gather(*(
        w.run(chat, budget_total=200, fixed_tokens=0, tokens_before=300, reason="over_trigger")
        for w in workers
    ))
    # Both chose the same span; one wrote the row, the other found it there.
    assert results[0].through == results[1].through
    assert sorted(r.skipped for r in results) == [False, True]
    async with engine.connect() as conn:
        count = (await conn.execute(text(
            "SELECT count(*) FROM messages WHERE chat_id = :c AND kind = 'summary'"),
            {"c": chat.id})).scalar()
    assert count == 1


async def test_facts_survive_twenty_compactions_by_a_helper_that_drops_lines(
    engine: AsyncEngine,
) -> None:
    chats, steps, chat = await _new_chat(engine)
    helper = LossyHelper(drop=0.3)
    compactor = Compactor(chats, helper, "lossy", COUNTER, CompactionPolicy(span_max_tokens=400))
    planted: list[str] = []
    for round_ in range(20):
        for i in range(6):
            n = round_ * 6 + i
            code = f"LCK-{n:04d}"
            planted.append(code)
            await _turn(steps, chat, f"Locker {code} belongs to the night shift.", f"Noted {n}.")
        current = await chats.get_chat("t", chat.id)
        assert current is not None
        done = await compactor.run(current, budget_total=150, fixed_tokens=0,
                                   tokens_before=current.token_total, reason="over_trigger")
        assert not done.skipped and done.coverage is not None
    summary, window = await chats.read_span(chat, 100)
    assert summary is not None
    # A fact is kept if the model still sees it: in the summary, or verbatim after it.
    visible = summary.content + "\n".join(m.content for m in window)
    kept = [code for code in planted if code in visible]
    assert helper.calls == 20
    assert len(window) <= 2  # the rest was summarised
    assert len(kept) / len(planted) >= 0.99, f"lost {sorted(set(planted) - set(kept))[:10]}"


async def test_lines_a_forgetful_helper_drops_are_kept_as_they_were_and_remembered_once(
    engine: AsyncEngine, minilm: OnnxMiniLM,
) -> None:
    """A helper that keeps nothing of the previous summary (an echo server's kind): verification
    puts the lost fact lines back verbatim. Pass after pass they stay the same lines, and the
    memory flush writes each fact once; a kept line that gained a list marker each pass read as
    a new fact each time and superseded its own copy."""
    chats, steps, chat = await _new_chat(engine)
    facts = PostgresFactStore(engine, minilm, minilm.name)
    compactor = Compactor(chats, LossyHelper(drop=0.0, previous=False), "forgetful", COUNTER,
                          CompactionPolicy(span_max_tokens=400, summary_max_ratio=1.0),
                          facts=facts)
    for round_ in range(4):
        for i in range(6):
            n = round_ * 6 + i
            await _turn(steps, chat, f"Locker LCK-{n:04d} belongs to the night shift.", "Noted.")
        current = await chats.get_chat("t", chat.id)
        assert current is not None
        await compactor.run(current, budget_total=400, fixed_tokens=0,
                            tokens_before=current.token_total, reason="over_trigger")
    summary, _ = await chats.read_span(chat, 100)
    assert summary is not None
    kept = sections_of(summary.content)[KEPT]
    assert kept and all(line.startswith("- [user] Locker LCK-") for line in kept), kept
    async with engine.connect() as conn:
        rows = (await conn.execute(text(
            "SELECT text, valid_to IS NULL FROM memories WHERE user_id = 'u'"))).all()
    lockers = [t for t, _ in rows if "LCK-" in t]
    assert all(current for _, current in rows), "a fact was superseded by a copy of itself"
    assert sorted(lockers) == [f"[user] Locker LCK-{n:04d} belongs to the night shift."
                               for n in range(len(lockers))]  # each once, as it was said
    assert len(lockers) >= 18  # what the four passes summarised
    # Each fact names the one message of its span that said it, not the whole span it read.
    async with engine.connect() as conn:
        named = (await conn.execute(text(
            "SELECT f.text, array_agg(m.content) FROM memories f, unnest(f.source_message_ids) s"
            " JOIN messages m ON m.id = s WHERE f.user_id = 'u' AND f.text LIKE '%LCK-%'"
            " GROUP BY f.text"))).all()
    assert len(named) == len(lockers)
    assert all(said == [fact.removeprefix("[user] ")] for fact, said in named), named


class GatedIndex:
    """An index of the chat that finishes only once the helper has been asked: a pass that
    waited for the index before calling the helper would never end."""

    def __init__(self, helper_asked: asyncio.Event) -> None:
        self.helper_asked, self.done = helper_asked, False

    def wake(self) -> None:
        pass

    async def index_chat(self, chat_id: uuid.UUID, *, through: int) -> bool:
        await self.helper_asked.wait()
        self.done = True
        return True


class AskedHelper(LossyHelper):
    def __init__(self, asked: asyncio.Event) -> None:
        super().__init__(drop=0.0)
        self.asked = asked

    async def stream(self, request: CompletionRequest) -> AsyncIterator[Delta]:
        self.asked.set()
        async for delta in super().stream(request):
            yield delta


async def test_the_span_is_indexed_while_the_helper_summarises_and_before_the_summary_row(
    engine: AsyncEngine,
) -> None:
    chats, steps, chat = await _new_chat(engine)
    for n in range(8):
        await _turn(steps, chat, f"Locker LCK-{n:04d} belongs to the night shift.", "Noted.")
    asked = asyncio.Event()
    index = GatedIndex(asked)
    written_after_index: list[bool] = []
    write_summary = chats.write_summary

    async def watched_write(*args: Any, **kwargs: Any) -> Any:
        written_after_index.append(index.done)
        return await write_summary(*args, **kwargs)

    chats.write_summary = watched_write  # type: ignore[method-assign]
    compactor = Compactor(chats, AskedHelper(asked), "asked", COUNTER,
                          CompactionPolicy(span_max_tokens=400), indexer=index)
    current = await chats.get_chat("t", chat.id)
    assert current is not None
    done = await asyncio.wait_for(compactor.run(
        current, budget_total=150, fixed_tokens=0, tokens_before=current.token_total,
        reason="over_trigger"), timeout=10)
    assert done.summary_id is not None and written_after_index == [True]
    summary, _ = await chats.read_span(current, 100)
    assert summary is not None and summary.meta["indexed"] is True

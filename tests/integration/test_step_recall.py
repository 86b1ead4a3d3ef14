"""Recall inside a step, against real Postgres and the local MiniLM: the query's vector is asked
for while the step opens, once, and an embedder that fails leaves the step answered."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from chat.ports import NewChat
from chat.steps import PostgresStepStore
from chat.store import PostgresChatStore
from chat.types import ModelSettings
from llm.errors import ProviderUnreachable
from llm.onnx_embedder import OnnxMiniLM
from llm.testing import ScriptedModel
from llm.tokens import TiktokenCounter
from llm.types import ContentDelta, Finish
from memory.indexer import Indexer
from memory.ranking import RecallConfig
from memory.recall_store import PostgresRecall
from orchestrator.step import AbortSignal, StepConfig, StepDeps, StepRequest, run_step, start_step
from tests.integration.history import import_chat

COUNTER = TiktokenCounter()


class WatchedEmbedder:
    """MiniLM, counting the searches it embeds; `fail` makes it unreachable."""

    def __init__(self, inner: OnnxMiniLM, fail: bool = False) -> None:
        self.inner, self.fail, self.queries = inner, fail, 0
        self.texts: list[list[str]] = []  # each search's texts
        self.asked = asyncio.Event()
        self.dim, self.symmetric = inner.dim, inner.symmetric

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await self.inner.embed(texts)

    async def embed_query(self, texts: list[str]) -> list[list[float]]:
        self.queries += 1
        self.texts.append(texts)
        self.asked.set()
        if self.fail:
            raise ProviderUnreachable("embedder down")
        return await self.inner.embed_query(texts)


class OpensAfterTheEmbedderIsAsked:
    """The real step store, whose open waits until the embedder has been asked for the
    message's vector: a step that asked only after opening would wait here for ever."""

    def __init__(self, inner: PostgresStepStore, asked: asyncio.Event) -> None:
        self.inner, self.asked = inner, asked

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def open(self, *args: Any, **kwargs: Any) -> Any:
        await self.asked.wait()
        return await self.inner.open(*args, **kwargs)


async def _step(engine: AsyncEngine, embedder: WatchedEmbedder,
                model: ScriptedModel, content: str = "where is my locker?",
                user: str = "u") -> list[Any]:
    chats = PostgresChatStore(engine)
    recall = PostgresRecall(engine, embedder, COUNTER.count, RecallConfig(),
                            embedder_name=embedder.inner.name)
    deps = StepDeps(
        chats=chats, steps=OpensAfterTheEmbedderIsAsked(PostgresStepStore(engine), embedder.asked),
        brain=model, counter=COUNTER, config=StepConfig(), recall=recall,
    )
    chat = await chats.create_chat(NewChat("t", user, "", "", ModelSettings(), "queue"))
    started = await asyncio.wait_for(
        start_step(deps, StepRequest("t", chat.id, content)), timeout=10)
    return [e async for e in run_step(deps, started, AbortSignal())]  # type: ignore[arg-type]


async def test_the_query_vector_is_asked_for_while_the_step_opens_and_only_once(
    engine: AsyncEngine, minilm: OnnxMiniLM,
) -> None:
    embedder = WatchedEmbedder(minilm)
    events = await _step(engine, embedder, ScriptedModel(
        [ContentDelta("By the door."), Finish("stop")]))
    assert events[-1].status == "complete" and embedder.queries == 1
    context = next(e for e in events if e.type == "context")
    assert context.recalled == []  # a new user: nothing to recall, and nothing failed


async def test_an_embedder_that_fails_leaves_the_step_answered_without_memory(
    engine: AsyncEngine, minilm: OnnxMiniLM,
) -> None:
    embedder = WatchedEmbedder(minilm, fail=True)
    events = await _step(engine, embedder, ScriptedModel(
        [ContentDelta("By the door."), Finish("stop")]))
    assert [e.type for e in events][-3:] == ["message_end", "telemetry", "step_end"]
    assert events[-1].status == "complete" and embedder.queries == 1
    assert not any(e.type == "message_error" for e in events)


async def test_a_question_naming_whom_the_history_greets_is_embedded_once_without_the_name(
    engine: AsyncEngine, minilm: OnnxMiniLM,
) -> None:
    """Asked as the step opens, before it knows whose chat it is: the names are counted in the
    chat's user's history first, so the embedder is asked once, for the question recall
    searches with (and, as MiniLM embeds both sides alike, the question as said, stored as the
    message's own vector), not once as said and again without the name."""
    chat_id, _ = await import_chat(engine, "t", "anna", [
        line for i in range(5) for line in ("Fine.", f"Hi Anna, how was day {i}?")])
    await Indexer(engine, minilm, minilm.name).index_chat(chat_id)
    embedder = WatchedEmbedder(minilm)
    question = "When does Anna turn thirty?"
    events = await _step(engine, embedder, ScriptedModel(
        [ContentDelta("In May."), Finish("stop")]), question, user="anna")
    assert events[-1].status == "complete"
    assert embedder.texts == [["When does turn thirty?", question]]

"""Recall's query embeddings from concurrent steps, sent to the embedder together.

Each step embeds its user message to search memory: at 32 concurrent chats, that was one request
to the embedder a step, and the worker's HTTP client cost more than the vector. Up to
`in_flight` requests run at once; the queries that arrive while all of them are out wait, then
go together in the next. A step waits for nothing while a request is free; under load each waits
at most for one request before its own (with a remote embedder whose round trip is long, more
requests in flight wait less and batch less: JIN_RECALL_QUERY_REQUESTS).

    embed_query(a) ─┐                  ┌─ a's vector
    embed_query(b) ─┼─ [a] then [b, c] ┼─ b's vector      (in_flight = 1)
    embed_query(c) ─┘                  └─ c's vector

The requests run in tasks of their own, so a step that is cancelled (aborted, its client gone)
takes its query out without failing the others'. One input the embedder refuses (a 4xx about
the input, llm.errors.rejects_input) must not fail the queries it went with: each is then asked
for again alone. A failure of the embedder itself (down, timed out, rate-limited) fails them all
at once, as it would have one by one.
"""

from __future__ import annotations

import asyncio

from llm.errors import rejects_input
from llm.ports import Embedder, Embedding

_Waiting = tuple[list[str], "asyncio.Future[list[Embedding]]"]


class BatchedQueries:
    """An embedder whose `embed_query` calls, when they overlap, share requests. `embed` (the
    indexer's batches) passes straight through."""

    def __init__(self, embedder: Embedder, *, in_flight: int = 1, limit: int = 64) -> None:
        if in_flight < 1 or limit < 1:
            raise ValueError("in_flight and limit must be at least 1")
        self.inner = embedder
        self.in_flight = in_flight  # requests out at once, at most
        self.limit = limit  # texts a request, at most
        self._waiting: list[_Waiting] = []
        self._senders: set[asyncio.Task[None]] = set()

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def symmetric(self) -> bool:
        return self.inner.symmetric

    async def embed(self, texts: list[str]) -> list[Embedding]:
        return await self.inner.embed(texts)

    async def embed_query(self, texts: list[str]) -> list[Embedding]:
        if not texts:
            return []
        answer: asyncio.Future[list[Embedding]] = asyncio.get_running_loop().create_future()
        self._waiting.append((texts, answer))
        if len(self._senders) < self.in_flight:
            self._senders.add(asyncio.create_task(self._send()))
        return await answer  # cancelled: the future is, and _send passes it over

    async def _send(self) -> None:
        batch: list[_Waiting] = []
        try:
            while self._waiting:
                batch = self._take()
                if batch:
                    await self._ask(batch)
        finally:
            # Out of the count now, not by a done callback: a query arriving before that would
            # count this sender and wait for it, and nobody would send it.
            self._senders.discard(asyncio.current_task())
            # Only when this task is cancelled (the worker stopping) is anyone left waiting.
            for _, answer in [*batch, *self._waiting]:
                answer.cancel()
            self._waiting.clear()

    def _take(self) -> list[_Waiting]:
        """The waiting queries that fit one request, oldest first (one longer than the limit
        goes alone: the embedder splits it into its own batches)."""
        batch: list[_Waiting] = []
        size = 0
        while self._waiting:
            texts, answer = self._waiting[0]
            if answer.done():  # its step was cancelled
                self._waiting.pop(0)
                continue
            if batch and size + len(texts) > self.limit:
                break
            batch.append(self._waiting.pop(0))
            size += len(texts)
        return batch

    async def _ask(self, batch: list[_Waiting]) -> None:
        try:
            vectors = await self.inner.embed_query([t for texts, _ in batch for t in texts])
        except Exception as exc:  # each waiting step gets it as if it had asked alone
            if len(batch) == 1 or not rejects_input(exc):
                _fail(batch, exc)
                return
            for one in batch:  # which input was refused: each gets its own answer
                await self._ask([one])
            return
        start = 0
        for texts, answer in batch:
            if not answer.done():
                answer.set_result(vectors[start : start + len(texts)])
            start += len(texts)


def _fail(batch: list[_Waiting], exc: BaseException) -> None:
    for _, answer in batch:
        if not answer.done():
            answer.set_exception(exc)

"""Reading the brain's stream under an abort signal (orchestrator/answer.py until_aborted)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from llm.errors import ProviderDisconnected
from orchestrator.answer import AbortSignal, until_aborted


class _Model:
    """A model's stream: the items, then a wait (or an error); it records being closed."""

    def __init__(self, items: list[str], *, then: BaseException | None = None,
                 hang: bool = False) -> None:
        self.items, self.then, self.hang = items, then, hang
        self.closed = False
        self.silent = asyncio.Event()  # past its items, waiting

    async def stream(self) -> AsyncIterator[str]:
        try:
            for item in self.items:
                await asyncio.sleep(0)
                yield item
            if self.hang:
                self.silent.set()
                await asyncio.sleep(3600)
            if self.then is not None:
                raise self.then
        finally:
            self.closed = True


async def _read(stream: AsyncIterator[str], abort: AbortSignal, got: list[str]) -> None:
    async for item in until_aborted(stream, abort):
        got.append(item)


async def test_every_item_comes_in_order_and_the_stream_ends_with_the_model() -> None:
    model, got = _Model([f"token {i}" for i in range(300)]), []
    await _read(model.stream(), AbortSignal(), got)
    assert got == [f"token {i}" for i in range(300)]
    assert model.closed


async def test_an_abort_while_the_model_is_silent_stops_at_once_and_closes_its_stream() -> None:
    model, abort, got = _Model(["a", "b"], hang=True), AbortSignal(), []
    both = asyncio.Event()

    async def read() -> None:
        async for item in until_aborted(model.stream(), abort):
            got.append(item)
            if len(got) == 2:
                both.set()

    reading = asyncio.create_task(read())
    await asyncio.wait_for(both.wait(), 1)
    await asyncio.wait_for(model.silent.wait(), 1)
    abort.set("aborted")
    await asyncio.wait_for(reading, 1)  # not the model's hour
    assert got == ["a", "b"]
    assert model.closed


async def test_a_model_failure_reaches_the_step_after_what_came_before_it() -> None:
    model, got = _Model(["a"], then=ProviderDisconnected("gone")), []
    with pytest.raises(ProviderDisconnected):
        await _read(model.stream(), AbortSignal(), got)
    assert got == ["a"]
    assert model.closed


async def test_a_step_that_stops_reading_closes_the_models_stream() -> None:
    model = _Model(["a", "b", "c"], hang=True)
    async for item in (reading := until_aborted(model.stream(), AbortSignal())):
        assert item == "a"
        break
    await reading.aclose()
    assert model.closed

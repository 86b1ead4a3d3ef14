"""Recall's query embeddings (llm/batching.py) over real HTTP to the fake server: queries that
arrive while a request is in flight go together in the next one, each still gets its own vector,
and one refused input, a cancelled step or a failing embedder touches no query but its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest

from llm.batching import BatchedQueries
from llm.embeddings import OpenAIEmbedder
from llm.errors import ProviderHTTPError
from llm.provider import Provider
from llm.testing import FakeOpenAIServer, embed_text
from llm.types import HTTPConfig, ProviderConfig

IN_FLIGHT = 0.3  # seconds the fake takes to answer each /embeddings request


@pytest.fixture
def slow(model: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    model.embed_delay = IN_FLIGHT
    yield model
    model.embed_delay = 0.0


@pytest.fixture
async def server(model_url: str) -> AsyncIterator[Provider]:
    config = ProviderConfig(role="embedder", base_url=model_url, model="fake")
    async with Provider(config, HTTPConfig(connect_timeout=5, read_timeout=5)) as provider:
        yield provider


def _batched(server: Provider, in_flight: int) -> BatchedQueries:
    return BatchedQueries(OpenAIEmbedder(server), in_flight=in_flight)


@pytest.fixture
def queries(server: Provider) -> BatchedQueries:
    """One request in flight at most: every query that arrives meanwhile waits for it."""
    return _batched(server, in_flight=1)


async def _in_flight(queries: BatchedQueries, text: str) -> asyncio.Task[list[list[float]]]:
    """A query whose request is on its way (the fake holds it for IN_FLIGHT seconds)."""
    task = asyncio.create_task(queries.embed_query([text]))
    await asyncio.sleep(IN_FLIGHT / 3)
    return task


def _vector(slow: FakeOpenAIServer, text: str) -> list[float]:
    return embed_text(text, slow.embed_dim)


async def test_queries_that_wait_for_a_request_share_the_next_and_get_their_own_vectors(
    slow: FakeOpenAIServer, queries: BatchedQueries
) -> None:
    first = await _in_flight(queries, "what did I say about taxes")
    texts = ["my cat's name", "the flight to Oslo", "Кіт спить", "room 101"]
    waiting = [asyncio.create_task(queries.embed_query([t])) for t in texts]

    answers = await asyncio.gather(first, *waiting)

    assert slow.embed_calls == 2  # the one in flight, then the four that waited, together
    assert slow.embed_inputs == ["what did I say about taxes", *texts]
    for text, [vector] in zip(["what did I say about taxes", *texts], answers, strict=True):
        assert np.allclose(vector, _vector(slow, text))
    # Alone, a query waits for nothing: one request of its own.
    assert np.allclose(await queries.embed_query(["alone"]), [_vector(slow, "alone")])
    assert slow.embed_calls == 3


async def test_a_query_waits_only_while_every_request_allowed_is_out(
    slow: FakeOpenAIServer, server: Provider
) -> None:
    queries = _batched(server, in_flight=2)
    first = asyncio.create_task(queries.embed_query(["first"]))
    await asyncio.sleep(IN_FLIGHT / 4)
    second = asyncio.create_task(queries.embed_query(["second"]))  # a request is free: goes
    await asyncio.sleep(IN_FLIGHT / 4)
    waiting = [asyncio.create_task(queries.embed_query([t])) for t in ("third", "fourth")]

    answers = await asyncio.gather(first, second, *waiting)

    assert slow.embed_calls == 3  # [first], [second], then [third, fourth] together
    assert sorted(slow.embed_inputs[:2]) == ["first", "second"]
    assert slow.embed_inputs[2:] == ["third", "fourth"]
    for text, [vector] in zip(["first", "second", "third", "fourth"], answers, strict=True):
        assert np.allclose(vector, _vector(slow, text))


async def test_an_input_the_embedder_refuses_fails_its_own_query_alone(
    slow: FakeOpenAIServer, queries: BatchedQueries
) -> None:
    first = await _in_flight(queries, "fine")
    slow.embed_reject = "REFUSED"
    texts = ["before it", "a REFUSED input", "after it"]
    waiting = [asyncio.create_task(queries.embed_query([t])) for t in texts]

    before, refused, after = await asyncio.gather(*waiting, return_exceptions=True)

    assert np.allclose(await first, [_vector(slow, "fine")])
    assert np.allclose(before, [_vector(slow, "before it")])
    assert np.allclose(after, [_vector(slow, "after it")])
    assert isinstance(refused, ProviderHTTPError) and refused.status == 400
    assert slow.embed_calls == 5  # the first, the three together (refused), each again alone


@pytest.mark.parametrize("status", [503, 429])  # down; rate-limited
async def test_an_embedder_that_fails_fails_every_waiting_query_once(
    slow: FakeOpenAIServer, queries: BatchedQueries, status: int
) -> None:
    first = await _in_flight(queries, "fine")
    slow.embed_status = status
    waiting = [asyncio.create_task(queries.embed_query([t])) for t in ["a", "b", "c"]]

    outcomes = await asyncio.gather(first, *waiting, return_exceptions=True)

    assert all(isinstance(o, ProviderHTTPError) and o.status == status for o in outcomes[1:])
    assert slow.embed_calls == 2  # not asked again one by one: no input is to blame
    slow.embed_status = 200
    assert np.allclose(await queries.embed_query(["back"]), [_vector(slow, "back")])


async def test_a_cancelled_query_leaves_the_others_answered(
    slow: FakeOpenAIServer, queries: BatchedQueries
) -> None:
    # One cancelled while its request is in flight, with another in the same request...
    gone_in_flight = asyncio.create_task(queries.embed_query(["gone in flight"]))
    same_request = asyncio.create_task(queries.embed_query(["same request"]))
    await asyncio.sleep(IN_FLIGHT / 3)
    # ...and one cancelled while it waits for the next request, with another waiting.
    gone_waiting = asyncio.create_task(queries.embed_query(["gone waiting"]))
    still_waiting = asyncio.create_task(queries.embed_query(["still waiting"]))
    await asyncio.sleep(0)
    gone_in_flight.cancel()
    gone_waiting.cancel()

    assert np.allclose(await same_request, [_vector(slow, "same request")])
    assert np.allclose(await still_waiting, [_vector(slow, "still waiting")])
    for task in (gone_in_flight, gone_waiting):
        with pytest.raises(asyncio.CancelledError):
            await task
    # The query cancelled while waiting was never sent.
    assert slow.embed_inputs == ["gone in flight", "same request", "still waiting"]

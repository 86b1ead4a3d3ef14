"""The OpenAI-compatible adapters over real HTTP: tool calls streamed by the fake server come out
whole, and embeddings come back batched, in input order, as unit vectors, or as an LLMError."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from llm.embeddings import OpenAIEmbedder
from llm.errors import LLMError, MalformedStream, ProviderHTTPError, ProviderTimeout
from llm.openai import OpenAIChatModel
from llm.provider import Provider
from llm.testing import FakeOpenAIServer, Reply, embed_text, serve_in_thread, stop_thread_server
from llm.types import (
    CompletionRequest,
    ContentDelta,
    Delta,
    Finish,
    HTTPConfig,
    PromptMessage,
    ProviderConfig,
    ToolCalls,
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


HTTP = HTTPConfig(connect_timeout=5, read_timeout=5)


@pytest.fixture
async def provider() -> AsyncIterator[Callable[..., Provider]]:
    """Providers at the given base URLs, closed after the test."""
    made: list[Provider] = []

    def at(base_url: str, http: HTTPConfig = HTTP) -> Provider:
        made.append(Provider(ProviderConfig(role="test", base_url=base_url, model="fake"), http))
        return made[-1]

    yield at
    for one in made:
        await one.aclose()


async def _stream(chat: OpenAIChatModel, request: CompletionRequest) -> list[Delta]:
    return [delta async for delta in chat.stream(request)]


async def test_streamed_tool_calls_come_out_whole_and_go_back_as_history(
    model: FakeOpenAIServer, model_url: str, provider: Callable[..., Provider]
) -> None:
    chat = OpenAIChatModel(provider(model_url))
    model.push(Reply(["Let me ", "check."], tool_calls=[
        {"name": "get_weather", "arguments": {"city": "Київ"}},
        {"name": "get_weather", "arguments": '{"city": "Lviv"}', "id": "call_lviv"},
    ]))
    question = PromptMessage("user", "Weather in Kyiv and Lviv?")

    deltas = await _stream(chat, CompletionRequest([question], tools=[WEATHER_TOOL]))

    assert "".join(d.text for d in deltas if isinstance(d, ContentDelta)) == "Let me check."
    assert [d.type for d in deltas[-2:]] == ["tool_calls", "finish"]
    calls, finish = deltas[-2], deltas[-1]
    assert isinstance(calls, ToolCalls) and isinstance(finish, Finish)
    assert finish.reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in calls.calls] == [
        ("get_weather", {"city": "Київ"}), ("get_weather", {"city": "Lviv"})]
    assert calls.calls[0].id and calls.calls[1].id == "call_lviv"
    sent = model.requests[-1]
    assert sent["tools"] == [WEATHER_TOOL] and sent["tool_choice"] == "auto"

    # The answer to the calls: the assistant's calls and the tools' results, as OpenAI takes them.
    model.push(Reply(["Sunny in both."]))
    asked = [c.to_openai() for c in calls.calls]
    history = [
        question,
        PromptMessage("assistant", "Let me check.", tool_calls=asked),
        *[PromptMessage("tool", "sunny", tool_call_id=c.id) for c in calls.calls],
    ]
    deltas = await _stream(chat, CompletionRequest(history, tools=[WEATHER_TOOL]))
    assert deltas[-1] == Finish("stop", deltas[-1].usage)
    sent_messages = model.requests[-1]["messages"]
    assert sent_messages[1]["tool_calls"][1] == {
        "id": "call_lviv", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Lviv"}'},
    }
    assert [m.get("tool_call_id") for m in sent_messages[2:]] == [c.id for c in calls.calls]


async def test_a_request_without_tools_sends_none(
    model: FakeOpenAIServer, model_url: str, provider: Callable[..., Provider]
) -> None:
    model.push(Reply(["plain"]))
    deltas = await _stream(OpenAIChatModel(provider(model_url)),
                           CompletionRequest([PromptMessage("user", "hi")]))
    assert not any(isinstance(d, ToolCalls) for d in deltas)
    assert "tools" not in model.requests[-1] and "tool_choice" not in model.requests[-1]


async def test_the_fake_answers_tool_calls_unstreamed_too(
    model: FakeOpenAIServer, model_url: str
) -> None:
    model.push(Reply(tool_calls=[{"name": "ping", "arguments": {}, "id": "p"}]))
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{model_url}/chat/completions", json={
            "model": "fake", "messages": [{"role": "user", "content": "ping"}]})
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == [
        {"id": "p", "type": "function", "function": {"name": "ping", "arguments": "{}"}}]


TEXTS = ["the cat sat", "a dog ran", "Кіт спить", "tax deadline", "the cat slept"]


async def test_embeddings_come_batched_in_input_order_as_unit_vectors(
    model: FakeOpenAIServer, model_url: str, provider: Callable[..., Provider]
) -> None:
    embedder = OpenAIEmbedder(provider(model_url), batch_size=2)
    with pytest.raises(RuntimeError, match="first embed call"):
        _ = embedder.dim

    vectors = np.array(await embedder.embed(TEXTS))

    assert model.embed_calls == 3  # 2 + 2 + 1
    assert model.embed_formats == ["base64"] * 3  # float32s, not JSON numbers
    assert embedder.dim == model.embed_dim == vectors.shape[1] and embedder.name == "fake"
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert np.allclose(vectors, [embed_text(t, model.embed_dim) for t in TEXTS])
    assert np.allclose(await embedder.embed_query(TEXTS[:1]), vectors[:1])
    assert await embedder.embed([]) == [] and model.embed_calls == 4


async def test_embedding_failures_are_llm_errors(
    model: FakeOpenAIServer, model_url: str, provider: Callable[..., Provider]
) -> None:
    with pytest.raises(LLMError, match="expected 128"):
        await OpenAIEmbedder(provider(model_url), dim=128).embed(["x"])
    model.embed_status = 500
    with pytest.raises(ProviderHTTPError) as caught:
        await OpenAIEmbedder(provider(model_url)).embed(["x"])
    assert caught.value.status == 500


async def _odd_embeddings(request: Request) -> Response:
    """Answers an OpenAI fake would not: shuffled, malformed, not JSON, no base64."""
    kind = request.path_params["kind"]
    if kind == "floats-only":  # a server that validates the body and knows no base64
        body = await request.json()
        ODD_FORMATS.append(body["encoding_format"])
        if body["encoding_format"] != "float":
            return JSONResponse({"error": {"message": "encoding_format: unsupported"}},
                                status_code=422)
        return JSONResponse({"data": [{"index": i, "embedding": [1.0, float(i)]}
                                      for i in range(len(body["input"]))]})
    if kind == "bad-base64":
        return JSONResponse({"data": [{"index": 0, "embedding": "not base64!"},
                                      {"index": 1, "embedding": "AAAA"}]})
    if kind == "reversed":
        data = [{"index": i, "embedding": [3.0, 4.0] if i else [1.0, 0.0]} for i in (1, 0)]
        return JSONResponse({"data": data})
    if kind == "ragged":
        return JSONResponse({"data": [{"index": 0, "embedding": [1.0]},
                                      {"index": 1, "embedding": [1.0, 2.0]}]})
    if kind == "missing":
        return JSONResponse({"data": [{"index": 0, "embedding": [1.0]}]})
    return PlainTextResponse("<html>bad gateway</html>")


async def _slow_embeddings(_: Request) -> Response:
    await asyncio.sleep(0.5)
    return JSONResponse({})


@pytest.fixture(scope="module")
def odd_server() -> Iterator[str]:
    app = Starlette(routes=[
        Route("/slow/embeddings", _slow_embeddings, methods=["POST"]),
        Route("/{kind}/embeddings", _odd_embeddings, methods=["POST"]),
    ])
    server, thread, port = serve_in_thread(app, lifespan="off")
    yield f"http://127.0.0.1:{port}"
    stop_thread_server(server, thread)


async def test_vectors_are_matched_to_inputs_by_index_not_by_position(
    odd_server: str, provider: Callable[..., Provider]
) -> None:
    vectors = await OpenAIEmbedder(provider(f"{odd_server}/reversed")).embed(["a", "b"])
    assert np.allclose(vectors, [[1.0, 0.0], [0.6, 0.8]])  # and normalised


ODD_FORMATS: list[str] = []


async def test_a_server_that_refuses_base64_is_asked_for_floats_from_then_on(
    odd_server: str, provider: Callable[..., Provider]
) -> None:
    embedder = OpenAIEmbedder(provider(f"{odd_server}/floats-only"))
    assert np.allclose(await embedder.embed(["a", "b"]), [[1.0, 0.0], [2 ** -0.5, 2 ** -0.5]])
    assert np.allclose(await embedder.embed(["c"]), [[1.0, 0.0]])
    assert ODD_FORMATS == ["base64", "float", "float"]  # refused once, never asked again


async def test_once_base64_came_back_a_refused_input_is_not_asked_again_for_floats(
    model: FakeOpenAIServer, model_url: str, provider: Callable[..., Provider]
) -> None:
    embedder = OpenAIEmbedder(provider(model_url))
    await embedder.embed(["fine"])
    model.embed_reject = "poison"
    with pytest.raises(ProviderHTTPError):
        await embedder.embed(["a poison pill"])
    assert model.embed_calls == 2  # one call for the refused input, not a second for floats


@pytest.mark.parametrize("kind", ["ragged", "missing", "html", "bad-base64"])
async def test_garbage_from_an_embeddings_server_is_malformed(
    odd_server: str, provider: Callable[..., Provider], kind: str
) -> None:
    with pytest.raises(MalformedStream):
        await OpenAIEmbedder(provider(f"{odd_server}/{kind}")).embed(["a", "b"])


async def test_a_slow_embeddings_server_times_out(
    odd_server: str, provider: Callable[..., Provider]
) -> None:
    slow = provider(f"{odd_server}/slow", HTTPConfig(connect_timeout=5, read_timeout=0.2))
    with pytest.raises(ProviderTimeout):
        await OpenAIEmbedder(slow).embed(["a"])

"""Bad input: the OpenAPI document fuzzed over real HTTP (no 5xx, every answer as documented),
then what no schema describes: bodies that are not JSON or too big, odd Unicode, forged cursors,
wrong methods."""

from __future__ import annotations

import base64
import itertools
import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import Case
from sqlalchemy.ext.asyncio import AsyncEngine
from websockets.sync.client import connect as connect_sync

from api.keys import KeyStore
from api.ws_protocol import Abort, Say, read_frame
from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import history, new_chat, stream_step

pytestmark = pytest.mark.bad_input

# Examples per operation, and the seed: `make test` runs the same few each time, `make
# test-bad-input` more of them, from a new seed each run (the failures say how to replay).
EXAMPLES = int(os.environ.get("TEST_BAD_INPUT_EXAMPLES", "25"))
_SEED = os.environ.get("TEST_BAD_INPUT_SEED", "1")
SEED = None if _SEED == "random" else int(_SEED)


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    """A fake model that answers anything (an echo), so steps can be fuzzed too."""
    server = FakeOpenAIServer(strict=False)
    yield server.start()
    server.stop()


@dataclass(frozen=True)
class Target:
    base: str
    chat_id: str
    auth: dict[str, str]  # an admin key's header: fuzzed as deployed, with keys on


@pytest.fixture
async def target(
    jin_factory: Callable[..., str], echo_url: str, engine: AsyncEngine
) -> Target:
    _, key = await KeyStore(engine).create("fuzz", admin=True)
    auth = {"Authorization": f"Bearer {key}"}
    base = jin_factory(brain_url=echo_url, helper_url=echo_url, embedder_url=echo_url,
                       rate_limit_per_minute=0,  # deep runs send thousands of requests
                       # Its routes too (the echo writes `User: ...` lines), and L2's.
                       runtime_memory=True, l2_enabled=True)
    async with httpx.AsyncClient(base_url=base, headers=auth) as client:
        chat = (await client.post("/v1/chats", json={"user_id": "u1", "title": "t"})).json()
    return Target(base, chat["id"], auth)


@pytest.fixture
def api_schema(target: Target) -> schemathesis.BaseSchema:
    config = schemathesis.Config.from_dict({
        **({"seed": SEED} if SEED is not None else {}),
        "headers": target.auth,
        "generation": {"max-examples": EXAMPLES},
        "phases": {"stateful": {"enabled": False}},
        # A body over the deployment's byte limit is refused unread (413), valid or not:
        # 200,000 characters of system prompt can be more than 1 MB of JSON.
        "checks": {
            "negative_data_rejection": {"expected-statuses": [
                "400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "429"]},
            "positive_data_acceptance": {"expected-statuses": [
                "2xx", "401", "403", "404", "409", "413", "429"]},
        },
        "operations": [{
            # A page cursor is opaque: one the API did not give out is refused (422), and no
            # schema can tell a forged one from a real one. A fact that is only a list bullet
            # or punctuation (";", "1.") is refused once cleaned, which no pattern says well.
            "include-name": ["GET /v1/chats", "GET /v1/memories", "POST /v1/memories",
                             "GET /v1/snapshots", "GET /v1/events", "GET /v1/entities"],
            "checks": {"positive_data_acceptance": {
                "expected-statuses": ["2xx", "401", "403", "404", "409", "413", "422", "429"]}},
        }, {
            # An OpenAI conversation must end with the user's message or a tool's result (with
            # the id of its call), which no schema says: 400, in OpenAI's error format.
            "include-name": ["POST /v1/chat/completions"],
            "checks": {"positive_data_acceptance": {
                "expected-statuses": ["2xx", "400", "401", "403", "404", "409", "413", "429"]}},
        }],
    })
    return schemathesis.openapi.from_url(f"{target.base}/openapi.json", config=config,
                                         headers=target.auth)


schema = schemathesis.pytest.from_fixture("api_schema")
_turn = itertools.count()


def _aim(case: Case, target: Target) -> None:
    """Most well-formed ids are swapped for ones that exist, so the fuzzing gets past 404;
    one in four stays unknown. DELETE gets a resource of its own each time. Every other step
    is asked for as a stream."""
    params = case.path_parameters or {}
    if case.method == "POST" and case.path.endswith("/messages") and next(_turn) % 2:
        # (The key is not copied in: schemathesis adds it per call, and leaves it out when it
        # checks that a request without one is refused.)
        given = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
        case.headers = {**given, "Accept": "text/event-stream"}
    for name in ("chat_id", "memory_id"):
        raw = params.get(name)
        try:
            known = uuid.UUID(str(raw))
        except ValueError:
            continue  # malformed on purpose: left for the 422
        if known.int % 4 == 0:
            continue
        if name == "chat_id":
            params[name] = target.chat_id if case.method != "DELETE" else httpx.post(
                f"{target.base}/v1/chats", json={"user_id": "u1"}, headers=target.auth
            ).json()["id"]
        elif isinstance(user := (case.query or {}).get("user_id"), str):
            made = httpx.post(f"{target.base}/v1/memories", json={"user_id": user, "text": "x"},
                              headers=target.auth)
            if made.status_code == 201:
                params[name] = made.json()["id"]


@schema.parametrize()
def test_the_api_keeps_to_its_spec(case: Case, target: Target) -> None:
    _aim(case, target)
    case.call_and_validate()


# Bodies no schema describes: each is a clean problem, and nothing is written.

PROBLEM = "application/problem+json"
NOT_JSON = {
    "invalid UTF-8": b'{"user_id": "\xff\xfe", "content": "\xc3\x28", "text": "\x80"}',
    "UTF-8-encoded surrogate": b'{"user_id": "\xed\xa0\x80", "content": "\xed\xa0\x80"}',
    "arrays 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "objects 100,000 deep": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    "a field 100,000 deep": b'{"content": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "a field 500 deep": b'{"user_id": "u", "text": ' + b"[" * 500 + b"]" * 500 + b"}",
    "cut short": b'{"user_id": "u", "content": "x',
    "a byte-order mark first": b'\xef\xbb\xbf{"user_id": "u", "content": "x", "text": "x"}',
    "lone surrogate, escaped": b'{"user_id": "\\ud800", "content": "\\udc00", "text": "\\ud800"}',
    "NaN": b'{"user_id": "u", "text": "x", "importance": NaN, "content": NaN}',
}


def _body_routes(chat_id: str) -> list[tuple[str, str]]:
    return [("POST", "/v1/chats"), ("PATCH", f"/v1/chats/{chat_id}"),
            ("POST", f"/v1/chats/{chat_id}/messages"), ("POST", "/v1/memories")]


async def _nothing_written(client: httpx.AsyncClient, chat_id: str) -> None:
    assert [c["id"] for c in (await client.get("/v1/chats")).json()["chats"]] == [chat_id]
    assert await history(client, chat_id) == []
    chat = (await client.get(f"/v1/chats/{chat_id}")).json()
    assert (chat["title"], chat["system_prompt"]) == ("t", "You are terse.")
    assert (await client.get("/v1/memories", params={"user_id": "u"})).json()["items"] == []


@pytest.mark.parametrize("body", NOT_JSON.values(), ids=NOT_JSON.keys())
async def test_a_body_that_is_not_valid_json_is_a_400_or_422_problem(
    client: httpx.AsyncClient, body: bytes
) -> None:
    chat_id = await new_chat(client, user_id="u")
    for method, path in _body_routes(chat_id):
        response = await client.request(method, path, content=body,
                                        headers={"content-type": "application/json"})
        assert response.status_code in (400, 422), (method, path, response.text)
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["code"] in ("bad_request", "invalid_request")
    await _nothing_written(client, chat_id)


async def test_a_body_over_the_limit_is_a_413_problem_on_every_route(
    client: httpx.AsyncClient,
) -> None:
    chat_id = await new_chat(client, user_id="u")
    huge = "x" * 1_000_001  # the default limit is 1,000,000 bytes
    for method, path in _body_routes(chat_id):
        body = {"user_id": "u", "content": huge, "text": huge, "title": huge}
        response = await client.request(method, path, json=body)
        assert response.status_code == 413, (method, path)
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["code"] == "request_too_large"
    await _nothing_written(client, chat_id)


# Text that is valid Unicode but odd: kept to the code point, everywhere it goes.
ODD = {
    "RTL override": "pay \u202eevil.exe\u202c now",
    "ZWJ family": "family \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 here",
    "skin tones": "thumbs \U0001f44d\U0001f3fd and wave \U0001f44b\U0001f3ff",
    "combining marks": "cafe\u0301 Z\u0324\u0354\u0367\u0311\u0313 n\u0303",
    "invisible": "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u2060wj",
    "separators and controls": "line\u2028para\u2029tab\tbell\x07esc\x1b[31mred",
    "astral, private, noncharacter": "\U0001d518\U0001d52b\U0001d526 \ue000 \U0010fffd \ufffe end",
    "mixed scripts": "\u0627\u0644\u0633\u0644\u0627\u0645 \u05e9\u05dc\u05d5\u05dd \u4f60\u597d",
}


@pytest.mark.parametrize("text", ODD.values(), ids=ODD.keys())
async def test_odd_unicode_is_stored_returned_and_sent_to_the_model_exactly(
    client: httpx.AsyncClient, model: FakeOpenAIServer, text: str
) -> None:
    chat_id = await new_chat(client, user_id=text, title=text, system_prompt=text)
    chat = (await client.get(f"/v1/chats/{chat_id}")).json()
    assert (chat["user_id"], chat["title"], chat["system_prompt"]) == (text, text, text)

    model.push(Reply([text[:5], text[5:]]))  # the answer splits it mid-way, as a stream may
    events = await stream_step(client, chat_id, text)
    assert "".join(d["chunk"] for n, d in events if n == "message_chunk") == text
    sent = model.requests[-1]["messages"]
    assert (sent[0]["content"], sent[-1]["content"]) == (text, text)
    rows = await history(client, chat_id)
    assert [r["content"].encode() for r in rows] == [text.encode()] * 2

    added = await client.post("/v1/memories", json={"user_id": text, "text": text})
    assert added.status_code == 201 and added.json()["text"] == text
    listed = (await client.get("/v1/memories", params={"user_id": text})).json()["items"]
    assert [f["text"] for f in listed] == [text]


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


FORGED_CURSORS = {
    "not base64": "nope!",
    "not UTF-8 inside": base64.urlsafe_b64encode(b"\xff\xfe|x").decode(),
    "no separator": _b64("2026-01-01T00:00:00+00:00"),
    "no offset": _b64(f"2026-01-01T00:00:00|{uuid.uuid4()}"),
    "before year 1 in UTC": _b64(f"0001-01-01T00:00:00+14:00|{uuid.uuid4()}"),
    "after year 9999 in UTC": _b64(f"9999-12-31T23:59:59-14:00|{uuid.uuid4()}"),
}


@pytest.mark.parametrize("cursor", FORGED_CURSORS.values(), ids=FORGED_CURSORS.keys())
async def test_a_forged_page_cursor_is_a_422_problem(
    client: httpx.AsyncClient, cursor: str
) -> None:
    for path, params in [("/v1/chats", {"cursor": cursor}),
                         ("/v1/memories", {"user_id": "u", "before": cursor})]:
        response = await client.get(path, params=params)
        assert response.status_code == 422, (path, response.text)
        assert response.headers["content-type"] == PROBLEM


async def test_a_wrong_method_is_a_405_naming_every_method_of_the_path(
    client: httpx.AsyncClient,
) -> None:
    chat_id = await new_chat(client)
    for method, path, allowed in [
        ("PUT", "/v1/chats", {"GET", "POST"}),
        ("OPTIONS", f"/v1/chats/{chat_id}", {"GET", "PATCH", "DELETE"}),
        ("DELETE", f"/v1/chats/{chat_id}/messages", {"GET", "POST"}),
    ]:
        response = await client.request(method, path)
        assert response.status_code == 405 and response.headers["content-type"] == PROBLEM
        assert set(response.headers["allow"].split(", ")) == allowed, path


# The WebSocket: no OpenAPI document describes it, so its frames are fuzzed here.

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
_FRAMES = st.one_of(
    st.text(max_size=60), st.binary(max_size=60), _JSON.map(json.dumps),
    st.fixed_dictionaries({}, optional={
        "type": st.sampled_from(["message", "abort", "Abort", "", "x"]) | _JSON,
        "text": st.text(max_size=40) | _JSON,
        "idempotency_key": st.text(max_size=300) | _JSON,
    }).map(json.dumps),
)
SOCKET_CODES = {"bad_request", "invalid_request", "unknown_type", "chat_busy"}


@settings(max_examples=EXAMPLES, deadline=None, derandomize=SEED is not None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sent=_FRAMES)
def test_a_socket_answers_any_frame_with_a_step_or_a_coded_error(
    target: Target, sent: str | bytes
) -> None:
    url = target.base.replace("http://", "ws://") + f"/ws/chat?chat_id={target.chat_id}"
    with connect_sync(url, additional_headers=target.auth, open_timeout=10) as ws:
        assert json.loads(ws.recv(10))["type"] == "subscribed"
        ws.send(sent)
        said = json.loads(ws.recv(10))
        if isinstance(read_frame(sent), Say):  # a step: it runs to its end
            while said["type"] not in ("step_end", "error"):
                said = json.loads(ws.recv(10))
            assert said["type"] == "step_end" or said["code"] in SOCKET_CODES, said
        elif isinstance(read_frame(sent), Abort):
            assert said["type"] == "abort_result"
        else:
            assert said["type"] == "error" and said["code"] in SOCKET_CODES, (sent, said)
        ws.send(json.dumps({"type": "abort"}))  # still open, still answering
        assert json.loads(ws.recv(10))["type"] == "abort_result"

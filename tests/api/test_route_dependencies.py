"""A step is served by its FastAPI route: what is added to the route's dependencies applies to
every step, streamed or not (there is no way around FastAPI for the hot path)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI, Request

from api import deps
from api.app import create_app
from api.problems import Problem
from api.settings import Settings
from llm.testing import FakeOpenAIServer, Reply, serve_in_thread, stop_thread_server
from tests.api.sse_client import history, new_chat, stream_step


@pytest.fixture
def app(database_url: str, model_url: str) -> FastAPI:
    return create_app(Settings(
        database_url=database_url, brain_url=model_url, brain_model="fake", helper_url=model_url,
        helper_model="fake", embedder_url=model_url, embedder_model="fake-embedder",
        runtime_memory=False,  # its helper is the brain's fake (tests/api/conftest.py)
        events_enabled=False,
    ))


@pytest.fixture
def base_url(app: FastAPI) -> Iterator[str]:
    server, thread, port = serve_in_thread(app)
    yield f"http://127.0.0.1:{port}"
    stop_thread_server(server, thread)


async def test_a_dependency_of_the_messages_route_runs_on_every_step(
    app: FastAPI, base_url: str, model: FakeOpenAIServer
) -> None:
    seen: list[str] = []

    async def audited_tenant(request: Request) -> str:
        """A deployment's own policy in front of the tenant: logs each caller, refuses one."""
        seen.append(f"{request.method} {request.url.path}")
        if request.headers.get("x-blocked"):
            raise Problem(403, "forbidden", "this caller is blocked here")
        return str(request.state.tenant)

    app.dependency_overrides[deps.tenant_of] = audited_tenant
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        chat_id = await new_chat(client)
        seen.clear()
        model.push(Reply(["streamed"]), Reply(["as json"]))
        events = await stream_step(client, chat_id, "one")
        assert dict(events)["message_end"]["status"] == "complete"
        answer = await client.post(f"/v1/chats/{chat_id}/messages", json={"content": "two"})
        assert answer.json()["content"] == "as json"
        path = f"/v1/chats/{chat_id}/messages"
        assert seen == [f"POST {path}", f"POST {path}"]

        # The same dependency can refuse a step, in either form, before anything is written.
        for accept in ("text/event-stream", "application/json"):
            refused = await client.post(path, json={"content": "three"},
                                        headers={"x-blocked": "1", "accept": accept})
            assert refused.status_code == 403
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["code"] == "forbidden"
        assert [r["content"] for r in await history(client, chat_id)] == [
            "one", "streamed", "two", "as json"]

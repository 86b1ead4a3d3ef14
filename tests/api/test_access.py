"""Keys, tenants and limits over real HTTP: who gets in, who sees what, who must wait."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine
from websockets.asyncio.client import connect

from api.keys import KeyStore
from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import SSE, new_chat, stream_step
from tests.api.ws_client import refusal, socket_url

PROBLEM = "application/problem+json"


def _client(base: str, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(base_url=base, timeout=30, headers=headers)


def _refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    assert response.json()["code"] == code


async def test_with_keys_every_route_but_health_and_the_reference_needs_a_live_key(
    jin_factory: Callable[..., str], engine: AsyncEngine
) -> None:
    keys = KeyStore(engine)
    record, secret = await keys.create("acme", "ci")
    base = jin_factory(auth_cache_seconds=0)
    async with _client(base) as anonymous, _client(base, secret) as acme:
        assert (await anonymous.get("/healthz")).status_code == 200
        assert (await anonymous.get("/readyz")).status_code == 200
        # The API's reference renders in a browser, which sends no key; it shows no data.
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert (await anonymous.get(path)).status_code == 200, path
        page = (await anonymous.get("/docs")).text
        asset = page[page.index("/docs/assets/"):].split('"')[0]
        assert (await anonymous.get(asset)).status_code == 200
        for method, path in [("GET", "/v1/chats"), ("POST", "/v1/chats"),
                             ("GET", "/v1/memories?user_id=u"), ("GET", "/docs/other"),
                             ("GET", "/metrics"), ("GET", "/v1/status")]:
            response = await anonymous.request(method, path, json={})
            _refused(response, 401, "missing_key")
            assert response.headers["www-authenticate"].startswith("Bearer")
        _refused(await anonymous.get("/v1/chats", headers={"Authorization": "Basic eDp5"}),
                 401, "invalid_authorization")
        _refused(await anonymous.get("/v1/chats", headers={"Authorization": "Bearer jin_nope"}),
                 401, "invalid_key")

        assert (await acme.get("/v1/chats")).status_code == 200
        spec = (await acme.get("/openapi.json")).json()  # clients learn the scheme from it
        assert spec["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
        assert spec["security"] == [{"apiKey": []}]
        assert spec["paths"]["/healthz"]["get"]["security"] == []
        assert "401" in spec["paths"]["/v1/chats"]["get"]["responses"]
        # Metrics and status are for operators: a tenant's key without admin is refused.
        _refused(await acme.get("/metrics"), 403, "admin_only")
        _refused(await acme.get("/v1/status"), 403, "admin_only")

        listed = await keys.list("acme")
        assert [k.prefix for k in listed] == [secret[:12]] and listed[0].last_used_at
        await keys.revoke(record.prefix)
        _refused(await acme.get("/v1/chats"), 401, "invalid_key")
        # Revoking the last key (say, a leaked one) does not open the door again.
        _refused(await anonymous.get("/v1/chats"), 401, "missing_key")
    # Only the hash was stored: the secret is nowhere in the table.
    async with engine.connect() as conn:
        dump = (await conn.exec_driver_sql("SELECT api_keys::text FROM api_keys")).scalar()
    assert secret not in str(dump) and secret[12:] not in str(dump)


async def test_without_keys_only_direct_loopback_callers_are_let_in(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.get("/v1/chats")).status_code == 200  # open: no key made yet
    # A proxy on this machine would make everyone behind it look local: not let in.
    for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
        response = await client.get("/v1/chats", headers={header: "203.0.113.9"})
        _refused(response, 401, "missing_key")


async def test_a_tenant_reaches_nothing_of_another_by_any_route(
    jin_factory: Callable[..., str], engine: AsyncEngine, model: FakeOpenAIServer,
    helper: FakeOpenAIServer,
) -> None:
    keys = KeyStore(engine)
    _, a_key = await keys.create("tenant-a")
    _, b_key = await keys.create("tenant-b")
    # L2 distils after a chat's second turn: A's chat has one, B's own chat (below) none.
    base = jin_factory(auth_cache_seconds=0, runtime_memory=True, l1_wait_s=10,
                       l2_enabled=True, l2_wait_s=10, l2_min_turns=2, l2_min_l1_versions=1,
                       l2_min_key_repeats=1)
    async with _client(base, a_key) as a, _client(base, b_key) as b:
        chat = await new_chat(a, user_id="same-user")
        model.push(Reply(["noted"]), Reply(["noted again"]))
        helper.push(Reply(["locker_code: 4417"]), Reply(["locker_code: 4417 (again)"]),
                    Reply(['repetition | low | gives the code twice | "locker code is 4417"']))
        await stream_step(a, chat, "my locker code is 4417")  # A's runtime memory
        await stream_step(a, chat, "again: my locker code is 4417")  # and patterns
        fact = await a.post("/v1/memories", json={"user_id": "same-user", "text": "code 4417"})
        assert fact.status_code == 201
        fact_id = fact.json()["id"]
        helper.push(Reply(["The user's locker code is 4417."]))  # A's session snapshot
        saved = await a.post(f"/v1/chats/{chat}/snapshots", json={"title": "locker"})
        assert saved.status_code == 201, saved.text
        snapshot = saved.json()["id"]

        # Tenant B, even naming the same user id, finds nothing and changes nothing.
        for method, path, body in [
            ("GET", f"/v1/chats/{chat}", None),
            ("PATCH", f"/v1/chats/{chat}", {"title": "mine now"}),
            ("GET", f"/v1/chats/{chat}/messages", None),
            ("POST", f"/v1/chats/{chat}/messages", {"content": "hello"}),
            ("GET", f"/v1/chats/{chat}/context", None),
            ("POST", f"/v1/chats/{chat}/abort", None),
            ("POST", f"/v1/chats/{chat}/reset", None),
            ("GET", f"/v1/chats/{chat}/runtime-memory", None),
            ("GET", f"/v1/chats/{chat}/runtime-memory?version=1", None),
            ("PATCH", f"/v1/chats/{chat}/runtime-memory/locker_code", {"durable": True}),
            ("DELETE", f"/v1/chats/{chat}/runtime-memory/locker_code", None),
            ("DELETE", f"/v1/chats/{chat}/runtime-memory", None),
            ("GET", f"/v1/chats/{chat}/runtime-patterns", None),
            ("GET", f"/v1/chats/{chat}/runtime-patterns?version=1", None),
            ("POST", f"/v1/chats/{chat}/snapshots", {}),
            ("DELETE", f"/v1/chats/{chat}", None),
        ]:
            response = await b.request(method, path, json=body)
            _refused(response, 404, "chat_not_found")
        # Nor A's snapshot: not listed, not read, not deleted, no chat started from it.
        for method, path, body in [
            ("GET", f"/v1/snapshots/{snapshot}?user_id=same-user", None),
            ("DELETE", f"/v1/snapshots/{snapshot}?user_id=same-user", None),
            ("POST", "/v1/chats", {"user_id": "same-user", "from_snapshot": snapshot}),
        ]:
            response = await b.request(method, path, json=body)
            _refused(response, 404, "snapshot_not_found")
        assert (await b.get("/v1/snapshots", params={"user_id": "same-user"})).json()[
            "snapshots"] == []
        # Nor over a socket: refused as over HTTP, and it is not told A's steps.
        async with connect(socket_url(base, chat), subprotocols=["jin", f"jin.key.{b_key}"],
                           ) as ws:
            said, closed = await refusal(ws)
        assert (said["code"], closed) == ("chat_not_found", 4404)
        assert (await b.get("/v1/chats")).json()["chats"] == []
        assert (await b.get("/v1/memories", params={"user_id": "same-user"})).json()[
            "items"] == []
        search = await b.get("/v1/memories", params={"user_id": "same-user", "q": "locker 4417"})
        assert search.status_code == 200 and search.json()["items"] == []
        gone = await b.delete(f"/v1/memories/{fact_id}", params={"user_id": "same-user"})
        assert gone.status_code == 404
        # The OpenAI-compatible route: A's chat id as B's chat name is a chat of B's own, and
        # nothing of A's reaches B's prompt.
        model.push(Reply(["no idea"]))
        helper.push(Reply(["asked_about: a locker code"]))  # B's own chat's runtime memory
        oai = await b.post("/v1/chat/completions", json={
            "model": "jin", "user": "same-user",
            "messages": [{"role": "user", "content": "my locker code is 4417"}]},
            headers={"X-Jin-Chat-Id": chat})
        assert oai.status_code == 200, oai.text
        assert oai.headers["x-jin-chat-id"] != chat
        assert not any("4417" in m["content"] for m in model.requests[-1]["messages"][:-1])

        # Tenant A still has all of it.
        assert (await a.get(f"/v1/chats/{chat}")).json()["title"] == "t"
        messages = (await a.get(f"/v1/chats/{chat}/messages")).json()["messages"]
        assert [m["content"] for m in messages] == [
            "my locker code is 4417", "noted", "again: my locker code is 4417", "noted again"]
        facts = (await a.get("/v1/memories", params={"user_id": "same-user"})).json()["items"]
        assert [f["text"] for f in facts] == ["code 4417"]
        l1 = (await a.get(f"/v1/chats/{chat}/runtime-memory")).json()
        assert (l1["version"], l1["memory"]) == (2, "locker_code: 4417 (again)")
        l2 = (await a.get(f"/v1/chats/{chat}/runtime-patterns")).json()
        assert [p["evidence"] for p in l2["patterns"]] == [["locker code is 4417"]]
        # B's chat gets its own state, in the background (an OpenAI client never waits for it),
        # and nothing of A's; A cannot read it.
        b_chat = oai.headers["x-jin-chat-id"]
        deadline = time.monotonic() + 30
        while (seen := await b.get(f"/v1/chats/{b_chat}/runtime-memory")).status_code == 404:
            assert time.monotonic() < deadline, seen.text
            await asyncio.sleep(0.05)
        assert seen.json()["memory"] == "asked_about: a locker code"
        _refused(await a.get(f"/v1/chats/{b_chat}/runtime-memory"), 404, "chat_not_found")
        mine = (await a.get("/v1/snapshots", params={"user_id": "same-user"})).json()
        assert [s["id"] for s in mine["snapshots"]] == [snapshot]


async def test_a_tenant_reaches_no_event_or_entity_of_another(
    jin_factory: Callable[..., str], engine: AsyncEngine, model: FakeOpenAIServer,
    helper: FakeOpenAIServer,
) -> None:
    keys = KeyStore(engine)
    _, a_key = await keys.create("tenant-a")
    _, b_key = await keys.create("tenant-b")
    base = jin_factory(auth_cache_seconds=0, events_enabled=True, events_batch_turns=2)
    async with _client(base, a_key) as a, _client(base, b_key) as b:
        chat = await new_chat(a, user_id="same-user")
        model.push(Reply(["noted"]))
        helper.push(Reply([json.dumps({  # after the step, A's event memory
            "segments": [{"start": 0, "end": 1, "topic": "locker"}],
            "events": [{"type": "profile_fact", "topic": "locker",
                        "properties": {"attribute": "locker code", "value": "4417"}}],
            "entities": [{"entity": "user_profile", "field": "card", "events": [0],
                          "value": "<<<<<<< SEARCH\n=======\n- Locker code 4417\n"
                                   ">>>>>>> REPLACE"}]})]))
        await stream_step(a, chat, "my locker code is 4417")
        for _ in range(200):  # A's extraction runs after the step
            entities = (await a.get("/v1/entities", params={"user_id": "same-user"})).json()
            if entities["items"]:
                break
            await asyncio.sleep(0.05)
        [entity] = entities["items"]
        [event] = (await a.get("/v1/events", params={"user_id": "same-user"})).json()["items"]

        # Tenant B, even naming the same user id, lists none and deletes none.
        for what in ("events", "entities"):
            listing = await b.get(f"/v1/{what}", params={"user_id": "same-user"})
            assert listing.status_code == 200 and listing.json()["items"] == []
        _refused(await b.delete(f"/v1/events/{event['id']}", params={"user_id": "same-user"}),
                 404, "event_not_found")
        _refused(await b.delete(f"/v1/entities/{entity['id']}",
                                params={"user_id": "same-user"}), 404, "entity_not_found")
        again = (await a.get("/v1/entities", params={"user_id": "same-user"})).json()["items"]
        assert [e["card"] for e in again] == ["## card\n- Locker code 4417"]


async def test_a_key_over_its_rate_limit_is_told_when_to_come_back(
    jin_factory: Callable[..., str], engine: AsyncEngine
) -> None:
    _, slow = await KeyStore(engine).create("acme")
    _, other = await KeyStore(engine).create("acme")
    base = jin_factory(rate_limit_per_minute=6, rate_limit_burst=2)
    async with _client(base, slow) as client, _client(base, other) as neighbour:
        assert [(await client.get("/v1/chats")).status_code for _ in range(2)] == [200, 200]
        refused = await client.get("/v1/chats")
        _refused(refused, 429, "rate_limited")
        assert int(refused.headers["retry-after"]) in range(1, 11)  # one token per 10 s
        assert (await neighbour.get("/v1/chats")).status_code == 200  # per key, not global
        assert (await client.get("/healthz")).status_code == 200


async def test_steps_over_the_worker_cap_get_503_with_retry_after(
    jin_factory: Callable[..., str], model: FakeOpenAIServer
) -> None:
    base = jin_factory(max_concurrent_steps=1)
    async with _client(base) as client:
        first, second = await new_chat(client), await new_chat(client)
        model.push(Reply(["slow ", "answer"], chunk_delay=0.5))
        running = asyncio.create_task(stream_step(client, first, "take your time"))
        for _ in range(100):  # until the first step streams (its own request, not a late one)
            if any(m.get("content") == "take your time"
                   for body in model.requests for m in body.get("messages", [])):
                break
            await asyncio.sleep(0.02)
        refused = await client.post(f"/v1/chats/{second}/messages", json={"content": "hi"},
                                    headers=SSE)
        _refused(refused, 503, "too_many_steps")
        assert refused.headers["retry-after"] == "1"
        events = await running
        assert events[-1][1]["status"] == "complete"
        model.push(Reply(["now"]))
        # The first step's slot is freed just after its last byte: a client that follows
        # Retry-After gets in.
        for _ in range(20):
            again = await client.post(f"/v1/chats/{second}/messages", json={"content": "hi"})
            if again.status_code != 503:
                break
            await asyncio.sleep(float(again.headers["retry-after"]) / 10)
        assert again.status_code == 200 and again.json()["status"] == "complete", again.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(database_url: str, model_url: str, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", *args],
        env={**os.environ, "DATABASE_URL": database_url, "JIN_BRAIN_URL": model_url,
             "JIN_HELPER_URL": model_url, "JIN_EMBEDDER_URL": model_url,
             "JIN_EMBEDDER_MODEL": "fake-embedder",
             "JIN_RUNTIME_MEMORY": "false",  # its helper is the brain's fake (tests/api/conftest)
             **env},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )


def test_without_keys_jin_refuses_to_serve_beyond_loopback(
    database_url: str, model_url: str
) -> None:
    proc = _serve(database_url, model_url, "--host", "0.0.0.0", "--port", str(_free_port()))
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert "no API key exists" in err and "jin keys create" in err


async def test_logs_are_json_lines_with_ids_and_no_content_or_keys(
    database_url: str, model_url: str, model: FakeOpenAIServer, engine: AsyncEngine
) -> None:
    _, secret = await KeyStore(engine).create("acme", admin=True)
    port = _free_port()
    proc = _serve(database_url, model_url, "--port", str(port))
    base = f"http://127.0.0.1:{port}"
    words = "the purple walrus hums at midnight"
    try:
        async with _client(base, secret) as client:
            for _ in range(300):
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
            chat = await new_chat(client)
            model.push(Reply(["a reply about walruses"], status=500))
            response = await client.post(f"/v1/chats/{chat}/messages", json={"content": words},
                                         headers={**SSE, "X-Request-Id": "req-7731"})
            assert response.headers["x-request-id"] == "req-7731"
            await client.get(f"/v1/chats/{chat}/context", params={"message": words})
            model.push(Reply(["fine"], usage={"prompt_tokens": 12, "completion_tokens": 3}))
            await stream_step(client, chat, "and now?")
            metrics = (await client.get("/metrics")).text
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)

    lines = [_json(line) for line in err.splitlines() if line.strip()]
    assert all(line is not None for line in lines), err[:2000]
    step_lines = [line for line in lines if line and line.get("request_id") == "req-7731"]
    assert any(line.get("chat_id") == chat and line.get("step_id") for line in step_lines)
    assert any("provider_error" in line["msg"] for line in step_lines)  # the failure is told
    # Nor the provider's error body (real servers echo the request in theirs).
    for needle in (words, "walrus", secret, secret[12:], "scripted failure"):
        assert needle not in err
    assert 'jin_provider_errors_total{code="provider_error"} 1.0' in metrics
    assert 'jin_http_requests_total{method="POST",route="/v1/chats",status="201"} 1.0' in metrics
    assert 'jin_step_seconds_count{status="failed"} 1.0' in metrics
    assert 'jin_step_seconds_count{status="complete"} 1.0' in metrics
    assert 'jin_tokens_total{direction="in"} 12.0' in metrics
    assert 'jin_tokens_total{direction="out"} 3.0' in metrics
    assert "jin_step_overhead_seconds_count 2.0" in metrics
    assert "jin_recall_seconds_count 2.0" in metrics


def _json(line: str) -> dict[str, Any] | None:
    import json

    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) and {"ts", "level", "msg"} <= set(value) else None



def _jin(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "api.cli", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "DATABASE_URL": database_url})


def test_jin_keys_create_list_revoke_and_audit_from_the_terminal(database_url: str) -> None:
    import json

    made = _jin(database_url, "keys", "create", "--tenant", "acme", "--name", "ci", "--admin")
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)
    assert key["key"].startswith("jin_") and key["admin"] and key["tenant_id"] == "acme"
    assert "only its hash is stored" in made.stderr

    listed = _jin(database_url, "keys", "list", "--tenant", "acme")
    shown = json.loads(listed.stdout)
    assert [(k["prefix"], k["name"], k["revoked_at"]) for k in shown] == [
        (key["key"][:12], "ci", None)]
    assert key["key"] not in listed.stdout  # a list never shows a secret

    revoked = _jin(database_url, "keys", "revoke", key["prefix"])
    assert revoked.returncode == 0 and json.loads(revoked.stdout)["revoked_at"]
    unknown = _jin(database_url, "keys", "revoke", "jin_nosuchkey")
    assert unknown.returncode == 1 and "no key has the id or prefix" in unknown.stderr

    audited = _jin(database_url, "audit")
    assert audited.returncode == 0, audited.stdout
    assert json.loads(audited.stdout)["clean"] is True


def test_metrics_of_all_worker_processes_are_summed(
    database_url: str, model_url: str, tmp_path: Any
) -> None:
    port = _free_port()
    proc = _serve(database_url, model_url, "--port", str(port), "--workers", "2",
                  PROMETHEUS_MULTIPROC_DIR=str(tmp_path))
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        # A new connection each: the kernel spreads them over the workers, once both are up
        # (/readyz answered from the first to start).
        sent, pids = 0, set()
        while sent < 6 or (len(pids) < 2 and sent < 600):
            assert httpx.get(f"{base}/v1/chats", timeout=10).status_code == 200
            sent += 1
            pids = {p.stem.rpartition("_")[2] for p in tmp_path.glob("*.db")}
        metrics = httpx.get(f"{base}/metrics", timeout=10).text
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert len(pids) >= 2  # both worker processes write there
    assert ('jin_http_requests_total{method="GET",route="/v1/chats",status="200"} '
            f'{float(sent)}') in metrics

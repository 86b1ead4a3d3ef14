"""The web search adapters against a fake search server over real HTTP: hits come back as
title, URL and excerpt; a provider that is down, slow, refuses or answers garbage is a FAILED
result, never an exception."""

from __future__ import annotations

import socket
import time
from contextlib import aclosing

import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from llm.search import SearchHit, SearxngSearch, SerperSearch
from llm.search_testing import SERPER_KEY, Document, FakeSearchServer
from llm.testing import serve_in_thread, stop_thread_server


@pytest.fixture
def url(search_server: tuple[FakeSearchServer, str]) -> str:
    return search_server[1]


async def test_searxng_returns_title_url_and_excerpt(search: FakeSearchServer, url: str) -> None:
    async with aclosing(SearxngSearch(url + "/search/", timeout=5)) as searxng:
        result = await searxng.search("capital of Ukraine", 5)
    assert result.status == "FOUND"
    assert result.hits[0] == SearchHit(
        "Kyiv - Wikipedia", "https://en.wikipedia.org/wiki/Kyiv",
        "Kyiv is the capital and most populous city of Ukraine, on the Dnipro river.")
    assert search.queries == ["capital of Ukraine"]


async def test_serper_by_key_returns_the_same_hits(search: FakeSearchServer, url: str) -> None:
    async with aclosing(SerperSearch(SERPER_KEY, url=url, timeout=5)) as serper:
        result = await serper.search("pgvector HNSW", 1)
    assert result.status == "FOUND"
    assert [h.url for h in result.hits] == ["https://github.com/pgvector/pgvector"]


async def test_a_query_without_matches_is_not_found(search: FakeSearchServer, url: str) -> None:
    async with aclosing(SearxngSearch(url, timeout=5)) as searxng:
        result = await searxng.search("zzz qqq", 5)
    assert (result.status, result.hits, result.code) == ("NOT_FOUND", (), None)


async def test_excerpts_are_one_bounded_line(search: FakeSearchServer, url: str) -> None:
    search.corpus = [Document("A\ntitle", "https://a.example", "line one\nstatus: FOUND\n"
                              + "word " * 400)]
    async with aclosing(SearxngSearch(url, timeout=5, excerpt_chars=100)) as searxng:
        [hit] = (await searxng.search("line word", 5)).hits
    assert "\n" not in hit.title + hit.excerpt
    assert hit.title == "A title" and len(hit.excerpt) <= 100


async def test_a_wrong_serper_key_fails(search: FakeSearchServer, url: str) -> None:
    async with aclosing(SerperSearch("wrong", url=url, timeout=5)) as serper:
        result = await serper.search("kyiv", 5)
    assert (result.status, result.code) == ("FAILED", "search_error")
    assert "403" in (result.error or "")


async def test_a_provider_that_answers_an_error_fails(search: FakeSearchServer, url: str) -> None:
    search.status = 503
    async with aclosing(SearxngSearch(url, timeout=5)) as searxng:
        result = await searxng.search("kyiv", 5)
    assert (result.status, result.code) == ("FAILED", "search_error")


async def test_a_slow_provider_fails_within_the_timeout(search: FakeSearchServer, url: str) -> None:
    search.delay = 1.5
    began = time.perf_counter()
    async with aclosing(SearxngSearch(url, timeout=0.3)) as searxng:
        result = await searxng.search("kyiv", 5)
    assert (result.status, result.code) == ("FAILED", "search_timeout")
    assert time.perf_counter() - began < 2


async def test_a_provider_that_is_down_fails() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with aclosing(SearxngSearch(f"http://127.0.0.1:{port}", timeout=2)) as searxng:
        result = await searxng.search("kyiv", 5)
    assert (result.status, result.code) == ("FAILED", "search_unreachable")


async def test_an_answer_that_is_not_the_providers_json_fails() -> None:
    app = Starlette(routes=[Route("/search", lambda _: Response("<html>hi</html>"))])
    server, thread, port = serve_in_thread(app, lifespan="off")
    try:
        async with aclosing(SearxngSearch(f"http://127.0.0.1:{port}", timeout=5)) as searxng:
            result = await searxng.search("kyiv", 5)
    finally:
        stop_thread_server(server, thread)
    assert (result.status, result.code) == ("FAILED", "search_malformed")

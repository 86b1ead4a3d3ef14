"""A fake web search server over a fixed corpus, for tests. Real HTTP, like llm/testing.py.

    server = FakeSearchServer()
    url = server.start()                  # http://127.0.0.1:PORT, in a background thread
    SearxngSearch(url)                    # GET /search?q=...&format=json
    SerperSearch("key", url=url)          # POST /search, X-API-KEY

A document matches a query when they share a word of three letters or more; the more words
they share, the higher it ranks. `status` makes every search fail with that HTTP status,
`delay` makes each answer wait; `queries` keeps what was asked.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from llm.testing import serve_in_thread, stop_thread_server


@dataclass(frozen=True)
class Document:
    title: str
    url: str
    content: str


CORPUS = (
    Document("Kyiv - Wikipedia", "https://en.wikipedia.org/wiki/Kyiv",
             "Kyiv is the capital and most populous city of Ukraine, on the Dnipro river."),
    Document("Postgres 17 released", "https://www.postgresql.org/about/news/postgresql-17/",
             "PostgreSQL 17 was released on 26 September 2024 with incremental backup."),
    Document("pgvector", "https://github.com/pgvector/pgvector",
             "Open-source vector similarity search for Postgres: HNSW and IVFFlat indexes."),
)
SERPER_KEY = "serper-test-key"


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) >= 3}


class FakeSearchServer:
    def __init__(self, corpus: tuple[Document, ...] | list[Document] = CORPUS) -> None:
        self.corpus = list(corpus)
        self.status = 200
        self.delay = 0.0
        self.queries: list[str] = []
        self._server: Any = None
        self._thread: Any = None
        self.app = Starlette(routes=[
            Route("/search", self._searxng, methods=["GET"]),
            Route("/search", self._serper, methods=["POST"]),
        ])

    def reset(self) -> None:
        self.corpus, self.status, self.delay = list(CORPUS), 200, 0.0
        self.queries.clear()

    def matches(self, query: str) -> list[Document]:
        asked = _words(query)
        scored = [(len(asked & _words(f"{d.title} {d.content}")), i, d)
                  for i, d in enumerate(self.corpus)]
        return [d for score, _, d in sorted(scored, key=lambda s: (-s[0], s[1])) if score]

    async def _answer(self, query: str, body: Any) -> Response:
        self.queries.append(query)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.status >= 400:
            return Response(b'{"error": "scripted failure"}', status_code=self.status,
                            media_type="application/json")
        return Response(orjson.dumps(body), media_type="application/json")

    async def _searxng(self, request: Request) -> Response:
        query = request.query_params.get("q", "")
        if request.query_params.get("format") != "json":
            return Response("HTML is not served here", status_code=403)
        results = [{"title": d.title, "url": d.url, "content": d.content, "engine": "fake"}
                   for d in self.matches(query)]
        return await self._answer(query, {"query": query, "results": results})

    async def _serper(self, request: Request) -> Response:
        if request.headers.get("x-api-key") != SERPER_KEY:
            return Response(b'{"message": "Unauthorized."}', status_code=403,
                            media_type="application/json")
        body = orjson.loads(await request.body())
        query, num = str(body.get("q", "")), int(body.get("num", 10))
        organic = [{"title": d.title, "link": d.url, "snippet": d.content, "position": i + 1}
                   for i, d in enumerate(self.matches(query)[:num])]
        return await self._answer(query, {"searchParameters": {"q": query},
                                          "organic": organic})

    def start(self, port: int = 0) -> str:
        """Serve on 127.0.0.1 in a background thread; returns the base URL."""
        self._server, self._thread, bound = serve_in_thread(self.app, port=port, lifespan="off")
        return f"http://127.0.0.1:{bound}"

    def stop(self) -> None:
        stop_thread_server(self._server, self._thread)

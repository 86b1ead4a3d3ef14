"""Web search for the brain's runtime actions: the port and its adapters (SearXNG, Serper).

A search's outcome is a value, never an exception: FOUND with its hits, NOT_FOUND, or FAILED
with a stable code (the provider is down, slow, refused the request or answered something
that is not its API). The step hands the outcome to the model as evidence and goes on.

    SearxngSearch(url, ...)    a SearXNG instance's JSON API: GET {url}/search?q=...&format=json
    SerperSearch(key, ...)     Serper: POST https://google.serper.dev/search, X-API-KEY

Each adapter owns one httpx client; `timeout` bounds a whole search (connect, answer and body),
so a server that trickles bytes fails as surely as one that hangs.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import httpx

log = logging.getLogger("jin.search")

SearchStatus = Literal["FOUND", "NOT_FOUND", "FAILED"]
# Why a search FAILED: search_timeout, search_unreachable, search_error (a non-2xx answer),
# search_malformed (not the provider's JSON), search_unavailable (none configured), aborted.


@dataclass(frozen=True)
class SearchHit:
    title: str
    url: str
    excerpt: str

    def to_json(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "excerpt": self.excerpt}


@dataclass(frozen=True)
class SearchResult:
    status: SearchStatus
    hits: tuple[SearchHit, ...] = ()
    code: str | None = None  # why it FAILED
    error: str | None = None  # in words, for the client and the model

    @staticmethod
    def failed(code: str, error: str) -> SearchResult:
        return SearchResult("FAILED", (), code, error)


class WebSearch(Protocol):
    """A web search provider."""

    @property
    def name(self) -> str:
        """The provider's name, for logs and /v1/status (searxng, serper)."""
        ...

    async def search(self, query: str, limit: int) -> SearchResult:
        """At most `limit` hits for `query`. Never raises for the provider's failures: they
        are a FAILED result with a code."""
        ...

    async def aclose(self) -> None:
        """Close the provider's HTTP client."""
        ...


def _clean(text: Any, limit: int) -> str:
    """One line of at most `limit` characters: a provider's text may hold newlines, which
    would let a page fake the fields that follow it in the evidence."""
    line = re.sub(r"\s+", " ", str(text or "")).strip()
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


class _HTTPSearch:
    """The client and the failure mapping the adapters share."""

    name = "search"

    def __init__(self, base_url: str, timeout: float, excerpt_chars: int,
                 headers: dict[str, str] | None = None) -> None:
        self.timeout = timeout
        self.excerpt_chars = excerpt_chars
        self.client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"User-Agent": "jin", "Accept": "application/json", **(headers or {})},
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=16, keepalive_expiry=4.0),
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def _call(self, request: httpx.Request) -> Any | SearchResult:
        """The decoded JSON answer, or the FAILED result saying why there is none."""
        try:
            async with asyncio.timeout(self.timeout):
                response = await self.client.send(request)
        except (TimeoutError, httpx.TimeoutException):
            return SearchResult.failed("search_timeout",
                                       f"{self.name} did not answer within {self.timeout:g} s")
        except httpx.HTTPError as exc:
            return SearchResult.failed("search_unreachable",
                                       f"{self.name} could not be reached ({type(exc).__name__})")
        if response.status_code >= 400:
            return SearchResult.failed("search_error",
                                       f"{self.name} answered HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            return SearchResult.failed("search_malformed", f"{self.name} answered no JSON")

    def _result(self, rows: Any, fields: tuple[str, str, str], limit: int) -> SearchResult:
        if not isinstance(rows, list):
            return SearchResult.failed("search_malformed",
                                       f"{self.name} answered JSON without results")
        title, url, excerpt = fields
        hits = tuple(
            SearchHit(_clean(row.get(title), 200), _clean(row.get(url), 500),
                      _clean(row.get(excerpt), self.excerpt_chars))
            for row in rows if isinstance(row, dict) and row.get(url)
        )[:limit]
        return SearchResult("FOUND", hits) if hits else SearchResult("NOT_FOUND")


class SearxngSearch(_HTTPSearch):
    """A SearXNG instance (its `json` output format must be enabled in its settings.yml)."""

    name = "searxng"

    def __init__(self, url: str, timeout: float = 10.0, excerpt_chars: int = 400) -> None:
        url = url.rstrip("/")
        super().__init__(url.removesuffix("/search"), timeout, excerpt_chars)

    async def search(self, query: str, limit: int) -> SearchResult:
        request = self.client.build_request("GET", "/search",
                                            params={"q": query, "format": "json"})
        body = await self._call(request)
        if isinstance(body, SearchResult):
            return body
        rows = body.get("results") if isinstance(body, dict) else None
        return self._result(rows, ("title", "url", "content"), limit)


SERPER_URL = "https://google.serper.dev"


class SerperSearch(_HTTPSearch):
    """Serper's Google search API, by key."""

    name = "serper"

    def __init__(self, key: str, url: str = SERPER_URL, timeout: float = 10.0,
                 excerpt_chars: int = 400) -> None:
        super().__init__(url, timeout, excerpt_chars,
                         {"X-API-KEY": key, "Content-Type": "application/json"})

    async def search(self, query: str, limit: int) -> SearchResult:
        request = self.client.build_request("POST", "/search", json={"q": query, "num": limit})
        body = await self._call(request)
        if isinstance(body, SearchResult):
            return body
        rows = body.get("organic") if isinstance(body, dict) else None
        return self._result(rows, ("title", "link", "snippet"), limit)

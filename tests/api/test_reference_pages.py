"""/docs and /redoc work without internet access: every script, style and icon they load is
served by jin itself."""

from __future__ import annotations

import re

import httpx
import pytest

URL_ATTRIBUTES = re.compile(r"""(?:src|href|spec-url)="([^"]*)"|\burl: '([^']*)'""")


@pytest.mark.parametrize(("page", "assets"), [
    ("/docs", {"/docs/assets/swagger-ui-bundle.js": "javascript",
               "/docs/assets/swagger-ui.css": "text/css",
               "/docs/assets/favicon.png": "image/png"}),
    ("/redoc", {"/docs/assets/redoc.standalone.js": "javascript",
                "/docs/assets/favicon.png": "image/png"}),
])
async def test_reference_pages_load_only_what_jin_serves(
    client: httpx.AsyncClient, page: str, assets: dict[str, str]
) -> None:
    response = await client.get(page)
    assert response.status_code == 200
    html = response.text
    assert not re.search(r"https?://|//[a-z]", html), html  # no other host, not even a font

    urls = {a or b for a, b in URL_ATTRIBUTES.findall(html)}
    assert urls == {*assets, "/openapi.json"}
    for url, kind in assets.items():
        asset = await client.get(url)
        assert asset.status_code == 200, url
        assert kind in asset.headers["content-type"]
        assert len(asset.content) > 1000, url
    spec = await client.get("/openapi.json")
    assert spec.status_code == 200 and "/v1/chats" in spec.json()["paths"]

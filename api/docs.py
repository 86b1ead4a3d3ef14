"""The API reference pages, /docs (Swagger UI) and /redoc, with every asset served by jin.

FastAPI's own pages load their scripts from a CDN, so they are blank where jin has no internet
access. The same pages here take Swagger UI's and Redoc's files from the fastapi-offline package
(MIT; Swagger UI is Apache-2.0, Redoc MIT), mounted under /docs/assets.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"


def install(app: FastAPI) -> None:
    """Serve /docs, /redoc and their assets; the app is made with docs_url=redoc_url=None."""
    app.mount(ASSETS, StaticFiles(packages=[("fastapi_offline", "static")]), name="docs-assets")
    spec, title = app.openapi_url or "/openapi.json", f"{app.title} API"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=spec, title=title,
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
            # Swagger UI would otherwise send the spec to a public validator for its badge.
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=spec, title=title, redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png", with_google_fonts=False,
        )

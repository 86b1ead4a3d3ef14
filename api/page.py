"""The web page: `/` and its files under /ui/, all served by jin (no CDN, no build step).

The page shows text written by models, so its document forbids every script but jin's own files
(a Content-Security-Policy): even a renderer bug could not run what a model wrote.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/ui"
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


def install(app: FastAPI) -> None:
    """Serve the page at `/` and its scripts and styles under /ui/."""
    static = files("api") / "static"  # where the package is installed, not the working directory
    app.mount(ASSETS, StaticFiles(directory=str(static)), name="page-assets")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(
            str(static / "index.html"), media_type="text/html",
            headers={"Content-Security-Policy": POLICY, "Cache-Control": "no-cache",
                     "X-Content-Type-Options": "nosniff"},
        )

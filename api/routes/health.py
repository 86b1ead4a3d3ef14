"""Liveness, readiness and the status of the model roles."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from api.app_banner import EMBEDDED_BANNER
from api.database import head_revision
from api.deps import RuntimeDep
from llm.types import ProviderConfig
from memory.indexer import Indexer
from memory.search import PostgresRecall

router = APIRouter()


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(runtime: RuntimeDep) -> JSONResponse:
    head = head_revision()
    try:
        async with runtime.engine.connect() as conn:
            current = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    except Exception as exc:  # readiness reports the failure instead of raising it
        return JSONResponse(
            {"status": "unavailable", "database": f"{type(exc).__name__}"}, status_code=503
        )
    ready = current == head
    return JSONResponse(
        {"status": "ready" if ready else "migrations_pending", "migration": current, "head": head},
        status_code=200 if ready else 503,
    )


def _role(value: ProviderConfig | dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, ProviderConfig):
        return {
            "url": value.base_url,
            "model": value.model,
            "context_window": value.context_window,
            "embedded": value.embedded,
        }
    return dict(value)


@router.get("/v1/status")
async def status(runtime: RuntimeDep) -> dict[str, Any]:
    roles = {name: _role(v) for name, v in runtime.providers.items()}
    embedded = [name for name, r in roles.items() if r.get("embedded")]
    deps = runtime.deps
    memory: dict[str, Any] = {
        "enabled": runtime.memory_problem is None,
        "problem": runtime.memory_problem,
        "recall": deps.recall.config.mode if isinstance(deps.recall, PostgresRecall) else None,
        "tools": deps.facts is not None and deps.config.memory_tools,
    }
    if isinstance(deps.indexer, Indexer):
        memory["index_queue"] = await deps.indexer.pending()  # messages not yet embedded
        # Messages the embedder rejected again and again: not retried until `jin reindex`.
        memory["index_parked"] = await deps.indexer.parked()
    return {
        "version": "0.1.0",
        "roles": roles,
        "embedded_roles": embedded,
        "banner": EMBEDDED_BANNER if "brain" in embedded else None,
        "memory": memory,
    }

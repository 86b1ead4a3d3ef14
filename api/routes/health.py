"""Liveness, readiness and the status of the model roles."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import text

from api import problems
from api.app_banner import EMBEDDED_BANNER
from api.database import head_revision
from api.deps import RuntimeDep
from api.role_status import Probe
from llm.types import ProviderConfig

router = APIRouter()


class Healthy(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "migrations_pending", "unavailable"]
    migration: str | None = None
    head: str | None = None
    database: str | None = Field(default=None, description="the error, when unreachable")


class Status(BaseModel):
    version: str
    roles: dict[str, dict[str, Any]]
    embedded_roles: list[str]
    banner: str | None
    memory: dict[str, Any]
    actions: dict[str, Any] = Field(
        description="runtime actions: the web search provider (null: none) and the caps")


_NOT_READY = {"model": Readiness, "description": "The database is unreachable or behind"}


@router.get("/healthz", response_model=None, responses={200: {"model": Healthy}})
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", response_model=None,
            responses={200: {"model": Readiness}, 503: _NOT_READY})
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


def _role(value: ProviderConfig | dict[str, Any], probe: Probe | None) -> dict[str, Any]:
    """A role as the status shows it: where it is served, its model and window, and whether
    its server answers now (the embedder built in always does)."""
    if not isinstance(value, ProviderConfig):
        return dict(value)
    role: dict[str, Any] = {
        "url": value.base_url,
        "model": value.model,
        "context_window": value.context_window,
        "embedded": value.embedded,
        "temperature": value.temperature,
        "max_tokens": value.max_tokens,
        "served_by": value.served_by,
    }
    if probe is None:  # served in process: nothing to ask
        return {**role, "answers": True, "error": None}
    return {**role, "context_window": value.context_window or probe.context_window,
            "answers": probe.answers, "error": probe.error}


@router.get("/v1/status", response_model=None, responses={
    200: {"model": Status}, **problems.responses(401, 403, 429, 503)})
async def status(runtime: RuntimeDep) -> dict[str, Any]:
    probes = await runtime.probe.check() if runtime.probe is not None else {}
    roles = {name: _role(v, probes.get(name)) for name, v in runtime.providers.items()}
    embedded = [name for name, r in roles.items() if r.get("embedded")]
    deps = runtime.deps
    memory: dict[str, Any] = {
        "enabled": runtime.memory_problem is None,
        "problem": runtime.memory_problem,
        "warning": runtime.memory_warning,
        "recall": deps.recall.mode if deps.recall is not None else None,
        "tools": deps.facts is not None and deps.config.memory_tools,
    }
    if deps.indexer is not None:
        memory["index_queue"] = await deps.indexer.pending()  # messages not yet embedded
        # Messages the embedder rejected again and again: not retried until `jin reindex`.
        memory["index_parked"] = await deps.indexer.parked()
    # Event and entity extraction: batches done, those that had content and yielded nothing
    # (never silent: OpenViking #4580), items kept and dropped, batches waiting, given up.
    memory["extraction"] = ({"enabled": True, **await runtime.extractor.store.counts()}
                            if runtime.extractor is not None else {"enabled": False})
    # TIME_COMPRESS: summaries written, events merged into them and purged since, sources
    # waiting for their TTL to run out.
    memory["compression"] = ({"enabled": True, **await runtime.compressor.store.counts()}
                             if runtime.compressor is not None else {"enabled": False})
    # The runtime layers on in this deployment (L1 and event extraction follow the helper
    # unless set: docs/configuration.md).
    memory["runtime"] = {"l1": deps.runtime_memory is not None,
                         "l2": deps.runtime_patterns is not None,
                         "l3": deps.snapshots is not None}
    return {
        "version": "0.1.0",
        "roles": roles,
        "embedded_roles": embedded,
        "banner": EMBEDDED_BANNER if "brain" in embedded else None,
        "memory": memory,
        "actions": {
            "web_search": deps.search.name if deps.search is not None else None,
            "max_repeats": deps.config.actions.max_repeats,
            "max_per_answer": deps.config.actions.max_actions,
        },
    }

"""`/v1/memories`: a user's durable facts, and search over everything recall reaches.

Every call is scoped to the caller's tenant and the `user_id` it names.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api import problems
from api.deps import RuntimeDep, TenantDep
from api.problems import Problem
from api.schemas import CURSOR, STRICT, Text, decode_cursor, encode_cursor
from llm.errors import LLMError
from memory.ports import FactStore, Recaller

router = APIRouter(prefix="/v1/memories", tags=["memories"],
                   responses=problems.responses(401, 429, 503))

UserId = Annotated[Text, Query(min_length=1, max_length=200)]


class AddMemory(BaseModel):
    model_config = STRICT

    user_id: Text = Field(min_length=1, max_length=200)
    text: Text = Field(min_length=1, max_length=2000)
    importance: float = Field(default=0.5, ge=0, le=1)


# The shapes of answers, for the OpenAPI document (`Fact.to_json`, `Recalled.to_json`).


class FactOut(BaseModel):
    id: uuid.UUID
    text: str
    importance: float
    origin: str
    sources: list[uuid.UUID] = Field(description="the messages the fact came from")
    valid_from: datetime
    valid_to: datetime | None = Field(description="set once forgotten or superseded")
    superseded_by: uuid.UUID | None
    created_at: datetime
    updated_at: datetime


class FactPage(BaseModel):
    """Without `q`: the user's facts, newest first."""

    items: list[FactOut]
    next: str | None = Field(description="pass as `before` for the next page")


class RecalledOut(BaseModel):
    id: uuid.UUID
    source: str
    role: str | None
    text: str
    created_at: datetime
    chat_id: uuid.UUID | None
    tokens: int
    scores: dict[str, float]


class RecallOut(BaseModel):
    """With `q`: what recall finds, facts and past messages, with each score."""

    query: str
    mode: str
    items: list[RecalledOut]
    candidates: int
    timings: dict[str, float]


class FactWriteOut(FactOut):
    result: Literal["added", "updated", "superseded"]
    replaced: uuid.UUID | None


def _facts(runtime: RuntimeDep) -> FactStore:
    if runtime.deps.facts is None:
        raise Problem(503, "memory_unavailable", runtime.memory_problem or "memory is disabled")
    return runtime.deps.facts


def _recall(runtime: RuntimeDep) -> Recaller:
    if runtime.deps.recall is None:
        detail = runtime.memory_problem or "recall is turned off (JIN_RECALL=false)"
        raise Problem(503, "recall_unavailable", detail)
    return runtime.deps.recall


def _embedder_down(exc: LLMError) -> Problem:
    return Problem(503, "embedder_unavailable", f"the embedder failed: {exc}", provider=exc.code)


@router.get("", response_model=None,
            responses={200: {"model": FactPage | RecallOut}, **problems.responses(422)})
async def list_or_search(
    runtime: RuntimeDep,
    tenant: TenantDep,
    user_id: UserId,
    q: Annotated[Text | None, Query(min_length=1, max_length=2000)] = None,
    mode: Literal["hybrid", "dense", "keyword"] = "hybrid",
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    history: bool = False,
    before: Annotated[str | None, Query(max_length=200, pattern=CURSOR,
                                        description="`next` of the previous page")] = None,
) -> JSONResponse:
    """Without `q`: the user's facts, newest first (`history` adds superseded and forgotten
    ones). With `q`: what recall would find, facts and past messages, with each score."""
    if q is not None:
        recall = _recall(runtime)
        try:
            result = await recall.search(tenant, user_id, q, mode=mode, limit=limit)
        except LLMError as exc:
            raise _embedder_down(exc) from exc
        # Plain JSON already: no generic encoder over every field of up to 200 items.
        return JSONResponse({"query": q, "mode": mode,
                             "items": [i.to_json() for i in result.items],
                             "candidates": result.candidates, "timings": result.timings})
    rows = await _facts(runtime).list(tenant, user_id, limit=limit + 1, history=history,
                                      before=_cursor(before))
    page = rows[:limit]
    cursor = encode_cursor(page[-1].updated_at, page[-1].id) if len(rows) > limit else None
    return JSONResponse({"items": [f.to_json() for f in page], "next": cursor})


def _cursor(value: str | None) -> tuple[datetime, uuid.UUID] | None:
    if value is None:
        return None
    try:
        return decode_cursor(value)
    except ValueError as exc:
        raise Problem(422, "invalid_request", "`before` is not a cursor from this API") from exc


@router.post("", status_code=201, response_model=None,
             responses={201: {"model": FactWriteOut}, **problems.responses(400, 413, 422)})
async def add(body: AddMemory, runtime: RuntimeDep, tenant: TenantDep) -> dict[str, Any]:
    """Write a fact; one that already exists (same text, or a close paraphrase) is updated."""
    facts = _facts(runtime)
    try:
        writes = await facts.write(tenant, body.user_id, [body.text], [], origin="api",
                                   importance=body.importance)
    except LLMError as exc:
        raise _embedder_down(exc) from exc
    if not writes:
        raise Problem(422, "invalid_request", "the fact is empty once cleaned")
    w = writes[0]
    fact = await facts.get(tenant, body.user_id, w.id)
    assert fact is not None
    return {"result": w.action, "replaced": str(w.replaced) if w.replaced else None,
            **fact.to_json()}


@router.delete("/{memory_id}", status_code=204, responses=problems.responses(404, 422))
async def forget(
    memory_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep, user_id: UserId
) -> Response:
    """Forget a fact: it leaves recall; `GET ?history=true` still shows it, with `valid_to`."""
    if not await _facts(runtime).forget(tenant, user_id, fact_id=memory_id):
        raise Problem(404, "not_found", f"memory {memory_id} does not exist")
    return Response(status_code=204)

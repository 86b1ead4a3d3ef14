"""L3 session snapshots: save a chat's session (`POST /v1/chats/{id}/snapshots`), list a
user's, read and delete one. A new chat starts from one by `POST /v1/chats` with
`from_snapshot` (api/routes/chats.py).

Every call is scoped to the caller's tenant; a snapshot is its user's: another tenant's chat is
404 `chat_not_found`, another user's (or tenant's) snapshot 404 `snapshot_not_found`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from api import problems
from api.deps import RuntimeDep, TenantDep
from api.problems import Problem
from api.runtime import Runtime
from api.schemas import CURSOR, STRICT, Text, decode_cursor, encode_cursor
from memory.ports import Snapshot
from memory.runtime_state import text
from orchestrator.snapshots import NothingToSave, SessionSnapshots, SnapshotLimit

router = APIRouter(tags=["session snapshots"], responses=problems.responses(401, 429, 503))

UserId = Annotated[Text, Query(min_length=1, max_length=200)]


class SaveSnapshot(BaseModel):
    model_config = STRICT

    title: Text = Field(default="", max_length=200,
                        description="unset: the chat's title")


class LineOut(BaseModel):
    key: str
    value: str
    strength: float
    durable: bool


class SnapshotOut(BaseModel):
    id: uuid.UUID
    user_id: str
    chat_id: uuid.UUID | None = Field(description="the chat it was taken of (null once deleted)")
    title: str
    digest: str = Field(description="what a chat started from it reads, fenced")
    digest_source: Literal["helper", "fallback"] = Field(
        description="fallback: the helper failed, jin wrote it from the L1 lines")
    digest_error: str | None = Field(description="why the helper's digest was not used")
    digest_tokens: int
    memory: str = Field(description="the L1 lines it carries, as `key: value`")
    lines: list[LineOut]
    l1_version: int | None = Field(description="the source chat's L1 version it copies")
    l2: dict[str, Any] | None = Field(description="the L2 patterns it carries, if any")
    via: Literal["route", "tool_call", "marker"]
    created_at: datetime


class SnapshotPage(BaseModel):
    snapshots: list[SnapshotOut]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page")
    enabled: bool = Field(description="false: snapshots are off, and the list is empty")


def snapshots_on(runtime: Runtime) -> SessionSnapshots:
    snapshots = runtime.deps.snapshots
    if snapshots is None:
        raise Problem(404, "session_snapshots_off",
                      "session snapshots are off (JIN_SESSION_SNAPSHOTS, JIN_RUNTIME_MEMORY)")
    return snapshots


def snapshot_missing(snapshot_id: uuid.UUID) -> Problem:
    return Problem(404, "snapshot_not_found", f"snapshot {snapshot_id} does not exist")


def snapshot_json(s: Snapshot) -> dict[str, Any]:
    error = s.meta.get("digest_error")
    return {
        "id": str(s.id), "user_id": s.user_id,
        "chat_id": str(s.chat_id) if s.chat_id is not None else None,
        "title": s.title, "digest": s.digest, "digest_source": s.digest_source,
        "digest_error": str(error) if error is not None else None,
        "digest_tokens": s.digest_tokens, "memory": text(s.l1_state),
        "lines": [line.to_json() for line in s.l1_state.lines], "l1_version": s.l1_version,
        "l2": s.l2_state, "via": s.via, "created_at": s.created_at.isoformat(),
    }


@router.post("/v1/chats/{chat_id}/snapshots", status_code=201, response_model=None,
             responses={201: {"model": SnapshotOut},
                        **problems.responses(400, 404, 409, 413, 422)})
async def save_snapshot(chat_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep,
                        body: SaveSnapshot | None = None) -> dict[str, Any]:
    """Save the chat's session as a snapshot of its user: its L1 lines (brought up to date with
    its finished turns first) and a digest the helper writes of them. A helper that fails does
    not fail the save: jin writes the digest from the lines (`digest_source: fallback`)."""
    l3 = snapshots_on(runtime)
    chat = await runtime.deps.chats.get_chat(tenant, chat_id)
    if chat is None:
        raise Problem(404, "chat_not_found", f"chat {chat_id} does not exist")
    try:
        saved = await l3.save(chat, body.title if body is not None else "", "route")
    except NothingToSave as exc:
        raise Problem(409, "snapshot_empty", str(exc)) from exc
    except SnapshotLimit as exc:
        raise Problem(409, "snapshot_limit", str(exc)) from exc
    return snapshot_json(saved)


@router.get("/v1/snapshots", response_model=None,
            responses={200: {"model": SnapshotPage}, **problems.responses(404, 422)})
async def list_snapshots(
    runtime: RuntimeDep, tenant: TenantDep, user_id: UserId,
    cursor: Annotated[str | None, Query(max_length=200, pattern=CURSOR,
                                        description="`next_cursor` of the previous page")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> dict[str, Any]:
    """The user's snapshots, newest first. While snapshots are off the list is empty and
    says so (`enabled`), rather than a 404: the page lists them whenever its memory panel
    opens."""
    l3 = runtime.deps.snapshots
    if l3 is None:
        return {"snapshots": [], "next_cursor": None, "enabled": False}
    try:
        before = decode_cursor(cursor) if cursor else None
    except ValueError as exc:
        raise Problem(422, "invalid_cursor", "the cursor is not one this API gave out") from exc
    found = await l3.store.list(tenant, user_id, limit + 1, before)
    page = found[:limit]
    more = len(found) > limit
    return {"snapshots": [snapshot_json(s) for s in page],
            "next_cursor": encode_cursor(page[-1].created_at, page[-1].id) if more else None,
            "enabled": True}


@router.get("/v1/snapshots/{snapshot_id}", response_model=None,
            responses={200: {"model": SnapshotOut}, **problems.responses(404, 422)})
async def get_snapshot(snapshot_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep,
                       user_id: UserId) -> dict[str, Any]:
    found = await snapshots_on(runtime).store.get(tenant, user_id, snapshot_id)
    if found is None:
        raise snapshot_missing(snapshot_id)
    return snapshot_json(found)


@router.delete("/v1/snapshots/{snapshot_id}", status_code=204,
               responses=problems.responses(404, 422))
async def delete_snapshot(snapshot_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep,
                          user_id: UserId) -> Response:
    """Delete the snapshot. Chats started from it keep their L1; its digest leaves their
    prompts."""
    if not await snapshots_on(runtime).store.delete(tenant, user_id, snapshot_id):
        raise snapshot_missing(snapshot_id)
    return Response(status_code=204)

"""`/v1/chats/{id}/runtime-memory`: a chat's L1 runtime memory, its versions and their diffs;
deleting a line or the whole state; marking a line durable.

Every call is scoped to the caller's tenant: another tenant's chat is 404 `chat_not_found`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, Field

from api import problems
from api.deps import RuntimeDep, TenantDep
from api.problems import Problem
from api.schemas import STRICT
from chat.types import Chat
from memory.ports import RuntimeVersion
from memory.runtime_state import diff, text
from orchestrator.runtime_memory import MemoryNotFound, RuntimeMemory

router = APIRouter(prefix="/v1/chats", tags=["runtime memory"],
                   responses=problems.responses(401, 429, 503))

Key = Annotated[str, Path(pattern=r"^[a-z0-9_]{1,64}$",
                          description="a line's key, lowercase words joined by underscores")]


class LineOut(BaseModel):
    key: str
    value: str
    strength: float = Field(description="0..1: decays each rewrite, rises when kept or changed")
    durable: bool
    key_status: Literal["new", "changed", "same"]
    value_status: Literal["new", "changed", "same"]
    change_ratio: float = Field(description="0 same .. 1 new, against the previous version")
    previous_key: str | None = Field(description="the previous version's key it was matched to")


class RemovedOut(BaseModel):
    key: str
    value: str


class RuntimeMemoryOut(BaseModel):
    chat_id: uuid.UUID
    version: int = Field(description="0 before the first update")
    created_at: datetime | None
    source: str | None = Field(description="update, unresolved, deleted or durable")
    through_position: int | None = Field(description="the last answer the state reflects")
    memory: str = Field(description="the state as `key: value` lines; `!` marks durable ones")
    lines: list[LineOut]
    removed: list[RemovedOut] = Field(description="lines of the previous version gone in this")
    deleted_keys: list[str] = Field(description="lines the user deleted, kept out of rewrites")
    versions: list[VersionOut] = Field(description="every version of the state, newest first")


class VersionOut(BaseModel):
    version: int
    created_at: datetime
    source: str
    through_position: int | None
    lines: int


class DurableIn(BaseModel):
    model_config = STRICT

    durable: bool


async def _chat(runtime: RuntimeDep, tenant: str, chat_id: uuid.UUID) -> tuple[
        Chat, RuntimeMemory]:
    chat = await runtime.deps.chats.get_chat(tenant, chat_id)
    if chat is None:
        raise Problem(404, "chat_not_found", f"chat {chat_id} does not exist")
    memory = runtime.deps.runtime_memory
    if memory is None:
        raise Problem(404, "runtime_memory_off", "runtime memory is off (JIN_RUNTIME_MEMORY)")
    return chat, memory


async def _view(memory: RuntimeMemory, tenant: str, chat_id: uuid.UUID,
                current: RuntimeVersion | None, previous: RuntimeVersion | None
                ) -> dict[str, Any]:
    versions = [
        {"version": v.version, "created_at": v.created_at.isoformat(), "source": v.source,
         "through_position": v.through_position, "lines": v.lines}
        for v in await memory.store.versions(tenant, chat_id)]
    if current is None:
        return {"chat_id": str(chat_id), "version": 0, "created_at": None, "source": None,
                "through_position": None, "memory": "", "lines": [], "removed": [],
                "deleted_keys": [], "versions": versions}
    changes = diff(previous.state if previous else None, current.state)
    return {
        "chat_id": str(chat_id), "version": current.version,
        "created_at": current.created_at.isoformat(), "source": current.source,
        "through_position": current.through_position, "memory": text(current.state),
        **changes.to_json(),
        "deleted_keys": sorted({t.key for t in current.state.tombstones}),
        "versions": versions,
    }


@router.get("/{chat_id}/runtime-memory", response_model=None,
            responses={200: {"model": RuntimeMemoryOut}, **problems.responses(404, 422)})
async def get_runtime_memory(
    chat_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep,
    version: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> dict[str, Any]:
    """The latest state (or version `version`), each line against the version before it, and
    the list of every version."""
    _, memory = await _chat(runtime, tenant, chat_id)
    if version is None:
        latest = await memory.store.latest(tenant, chat_id)
        found = None if latest is None else await memory.store.version(
            tenant, chat_id, latest.version)
    else:
        found = await memory.store.version(tenant, chat_id, version)
        if found is None:
            raise Problem(404, "runtime_memory_version_not_found",
                          f"chat {chat_id} has no runtime memory version {version}")
    return await _view(memory, tenant, chat_id, *(found or (None, None)))


@router.delete("/{chat_id}/runtime-memory", status_code=204,
               responses=problems.responses(404, 422))
async def delete_runtime_memory(chat_id: uuid.UUID, runtime: RuntimeDep,
                                tenant: TenantDep) -> Response:
    """Delete every line: a new, empty version; the helper's rewrites keep them out."""
    chat, memory = await _chat(runtime, tenant, chat_id)
    try:
        await memory.delete(tenant, chat, None)
    except MemoryNotFound as exc:
        raise Problem(404, "runtime_memory_not_found",
                      f"chat {chat_id} has no runtime memory yet") from exc
    return Response(status_code=204)


@router.delete("/{chat_id}/runtime-memory/{key}", status_code=204,
               responses=problems.responses(404, 422))
async def delete_line(chat_id: uuid.UUID, key: Key, runtime: RuntimeDep,
                      tenant: TenantDep) -> Response:
    """Delete one line: a new version without it; the helper's rewrites keep it out."""
    chat, memory = await _chat(runtime, tenant, chat_id)
    try:
        await memory.delete(tenant, chat, key)
    except MemoryNotFound as exc:
        raise Problem(404, "runtime_memory_key_not_found",
                      f"the runtime memory has no line {key!r}") from exc
    return Response(status_code=204)


@router.patch("/{chat_id}/runtime-memory/{key}", response_model=None,
              responses={200: {"model": RuntimeMemoryOut}, **problems.responses(404, 422)})
async def mark_line(chat_id: uuid.UUID, key: Key, body: DurableIn, runtime: RuntimeDep,
                    tenant: TenantDep) -> dict[str, Any]:
    """Mark a line durable (kept at its floor, never dropped by a rewrite), or not."""
    chat, memory = await _chat(runtime, tenant, chat_id)
    try:
        written = await memory.mark_durable(tenant, chat, key, body.durable)
    except MemoryNotFound as exc:
        raise Problem(404, "runtime_memory_key_not_found",
                      f"the runtime memory has no line {key!r}") from exc
    found = await memory.store.version(tenant, chat_id, written.version)
    return await _view(memory, tenant, chat_id, *(found or (written, None)))

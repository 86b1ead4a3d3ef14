"""`/v1/chats/{id}/runtime-patterns`: a chat's L2 pattern memory, its versions, and the alerts
L2 recorded about L1.

Every call is scoped to the caller's tenant: another tenant's chat is 404 `chat_not_found`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from api import problems
from api.deps import RuntimeDep, TenantDep
from api.problems import Problem
from memory.ports import PatternVersion
from memory.runtime_patterns import patterns_json
from orchestrator.runtime_patterns import RuntimePatterns, alert_json

router = APIRouter(prefix="/v1/chats", tags=["runtime memory"],
                   responses=problems.responses(401, 429, 503))


class PatternOut(BaseModel):
    type: Literal["repetition", "topic_shift", "stress_test", "contradiction",
                  "corrected_assumption"]
    description: str
    evidence: list[str] = Field(description="the user's own words, each at most 100 characters")
    first_seen: int = Field(description="the L1 version it was first seen in")
    last_seen: int = Field(description="the L1 version it was last seen in")
    occurrences: int = Field(description="user messages its evidence was found in")
    confidence: Literal["low", "medium", "high"]
    positions: list[int] = Field(description="those messages' turns, by their answer's position")


class PatternVersionOut(BaseModel):
    version: int
    created_at: datetime
    l1_version: int
    through_position: int | None
    patterns: int


class AlertOut(BaseModel):
    type: str = Field(description="stale_l1: an L1 update that changed no line")
    l1_version: int
    created_at: datetime
    detail: dict[str, Any]


class RuntimePatternsOut(BaseModel):
    chat_id: uuid.UUID
    version: int = Field(description="0 before the first distillation")
    created_at: datetime | None
    l1_version: int | None = Field(description="the newest L1 version it read")
    through_position: int | None = Field(description="the last answer it read")
    patterns: list[PatternOut]
    versions: list[PatternVersionOut] = Field(description="every version, newest first")
    alerts: list[AlertOut] = Field(description="the chat's alerts, newest first")


async def _patterns(runtime: RuntimeDep, tenant: str, chat_id: uuid.UUID) -> RuntimePatterns:
    if await runtime.deps.chats.get_chat(tenant, chat_id) is None:
        raise Problem(404, "chat_not_found", f"chat {chat_id} does not exist")
    patterns = runtime.deps.runtime_patterns
    if patterns is None:
        raise Problem(404, "runtime_patterns_off",
                      "L2 pattern memory is off (JIN_L2_ENABLED, or JIN_RUNTIME_MEMORY)")
    return patterns


@router.get("/{chat_id}/runtime-patterns", response_model=None,
            responses={200: {"model": RuntimePatternsOut}, **problems.responses(404, 422)})
async def get_runtime_patterns(
    chat_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep,
    version: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> dict[str, Any]:
    """The latest patterns (or version `version`), the list of every version, and the alerts."""
    store = (await _patterns(runtime, tenant, chat_id)).store
    versions = await store.versions(tenant, chat_id)
    current: PatternVersion | None = versions[0] if versions else None
    if version is not None:
        current = next((v for v in versions if v.version == version), None)
        if current is None:
            raise Problem(404, "runtime_patterns_version_not_found",
                          f"chat {chat_id} has no L2 patterns version {version}")
    return {
        "chat_id": str(chat_id),
        "version": current.version if current else 0,
        "created_at": current.created_at.isoformat() if current else None,
        "l1_version": current.l1_version if current else None,
        "through_position": current.through_position if current else None,
        "patterns": patterns_json(current.patterns) if current else [],
        "versions": [{"version": v.version, "created_at": v.created_at.isoformat(),
                      "l1_version": v.l1_version, "through_position": v.through_position,
                      "patterns": len(v.patterns)} for v in versions],
        "alerts": [alert_json(a) for a in await store.alerts(tenant, chat_id)],
    }

"""Column lists and row -> dataclass mapping. The schema itself is created by migrations/ only."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from chat.types import Chat, Message, ModelSettings, StepRecord
from db.rows import built

CHAT_COLUMNS = (
    "id, tenant_id, user_id, title, system_prompt, settings, busy_policy, created_at, updated_at, "
    "token_total, compaction, recovery, from_snapshot, assistant"
)
MESSAGE_COLUMNS = (
    "id, chat_id, position, kind, content, reasoning, status, token_count, usage, step_id, "
    "idempotency_key, meta, created_at, tokens_after"
)
STEP_COLUMNS = (
    "id, chat_id, status, user_message_id, assistant_message_id, idempotency_key, error_code, "
    "timings, created_at, finished_at"
)


def _json(value: Any) -> Any:
    if value == "{}":  # most rows' meta: skip the decoder (a window reads ~100 rows a step)
        return {}
    return json.loads(value) if isinstance(value, str) else value


def settings_from_json(value: Any) -> ModelSettings:
    data = _json(value) or {}
    known = ModelSettings.__dataclass_fields__
    return ModelSettings(**{k: v for k, v in data.items() if k in known})


def chat_from_row(row: Mapping[str, Any]) -> Chat:
    return Chat(
        id=row["id"],
        tenant_id=row["tenant_id"],
        user_id=row["user_id"],
        title=row["title"],
        system_prompt=row["system_prompt"],
        settings=settings_from_json(row["settings"]),
        busy_policy=row["busy_policy"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        token_total=row["token_total"],
        compaction=_json(row["compaction"]) or {},
        recovery=_json(row["recovery"]),
        from_snapshot=row["from_snapshot"],
        assistant=row["assistant"],
    )


def message_from_row(row: Mapping[str, Any]) -> Message:
    return built(
        Message,
        id=row["id"],
        chat_id=row["chat_id"],
        position=row["position"],
        kind=row["kind"],
        content=row["content"],
        reasoning=row["reasoning"],
        status=row["status"],
        token_count=row["token_count"],
        usage=_json(row["usage"]),
        step_id=row["step_id"],
        idempotency_key=row["idempotency_key"],
        meta=_json(row["meta"]) or {},
        created_at=row["created_at"],
        tokens_after=row["tokens_after"],
    )


def step_from_row(row: Mapping[str, Any]) -> StepRecord:
    return StepRecord(
        id=row["id"],
        chat_id=row["chat_id"],
        status=row["status"],
        user_message_id=row["user_message_id"],
        assistant_message_id=row["assistant_message_id"],
        idempotency_key=row["idempotency_key"],
        error_code=row["error_code"],
        timings=_json(row["timings"]) or {},
        created_at=row["created_at"],
        finished_at=row["finished_at"],
    )

"""Request bodies (validated) and the JSON shapes of responses."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from chat.types import Chat, Message

BusyPolicyIn = Literal["queue", "reject", "interrupt"]


class ModelSettingsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, max_length=200)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_answer_tokens: int | None = Field(default=None, gt=0, le=1_000_000)
    context_window: int | None = Field(default=None, gt=0, le=10_000_000)
    tail_budget_tokens: int | None = Field(default=None, gt=0, le=10_000_000)


class CreateChat(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str = Field(min_length=1, max_length=200)
    title: str = Field(default="", max_length=500)
    system_prompt: str = Field(default="", max_length=200_000)
    settings: ModelSettingsIn = Field(default_factory=ModelSettingsIn)
    busy_policy: BusyPolicyIn = "queue"


class UpdateChat(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, max_length=500)
    system_prompt: str | None = Field(default=None, max_length=200_000)
    settings: ModelSettingsIn | None = None
    busy_policy: BusyPolicyIn | None = None


class PostMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The size limit is the deployment's (413), checked by the step, not here (422).
    content: str = Field(min_length=1)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=200)


def chat_json(chat: Chat) -> dict[str, Any]:
    return {
        "id": str(chat.id),
        "user_id": chat.user_id,
        "title": chat.title,
        "system_prompt": chat.system_prompt,
        "settings": {k: v for k, v in dataclasses.asdict(chat.settings).items() if v is not None},
        "busy_policy": chat.busy_policy,
        "created_at": chat.created_at.isoformat(),
        "updated_at": chat.updated_at.isoformat(),
    }


def message_json(message: Message) -> dict[str, Any]:
    return {
        "id": str(message.id),
        "chat_id": str(message.chat_id),
        "position": message.position,
        "kind": message.kind,
        "content": message.content,
        "reasoning": message.reasoning,
        "status": message.status,
        "token_count": message.token_count,
        "usage": message.usage,
        "step_id": str(message.step_id) if message.step_id else None,
        "meta": message.meta,
        "created_at": message.created_at.isoformat(),
    }

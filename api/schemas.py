"""Request bodies (validated) and the JSON shapes of responses."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from chat.types import Chat, Message

BusyPolicyIn = Literal["queue", "reject", "interrupt"]


def _no_nul(value: str) -> str:
    # Postgres text cannot hold NUL; say so as a 422 instead of failing on write.
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]


class ModelSettingsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: Text | None = Field(default=None, max_length=200)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_answer_tokens: int | None = Field(default=None, gt=0, le=1_000_000)
    context_window: int | None = Field(default=None, gt=0, le=10_000_000)
    tail_budget_tokens: int | None = Field(default=None, gt=0, le=10_000_000)
    compact_trigger_ratio: float | None = Field(default=None, gt=0, le=1)
    compact_target_ratio: float | None = Field(default=None, gt=0, le=1)


class CreateChat(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: Text = Field(min_length=1, max_length=200)
    title: Text = Field(default="", max_length=500)
    system_prompt: Text = Field(default="", max_length=200_000)
    settings: ModelSettingsIn = Field(default_factory=ModelSettingsIn)
    busy_policy: BusyPolicyIn = "queue"


class UpdateChat(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: Text | None = Field(default=None, max_length=500)
    system_prompt: Text | None = Field(default=None, max_length=200_000)
    settings: ModelSettingsIn | None = None
    busy_policy: BusyPolicyIn | None = None

    @model_validator(mode="after")
    def _no_explicit_nulls(self) -> UpdateChat:
        nulls = [n for n in self.model_fields_set if getattr(self, n) is None]
        if nulls:
            raise ValueError(f"{', '.join(sorted(nulls))} cannot be null; leave it out instead")
        return self


class PostMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The size limit is the deployment's (413), checked by the step, not here (422).
    content: Text = Field(min_length=1)
    idempotency_key: Text | None = Field(default=None, min_length=1, max_length=200)


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

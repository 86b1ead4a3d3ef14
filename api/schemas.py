"""Request bodies (validated) and the JSON shapes of responses."""

from __future__ import annotations

import base64
import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from chat.types import Chat, Message, MessageKind, MessageStatus

BusyPolicyIn = Literal["queue", "reject", "interrupt"]


NO_NUL = r"^[^\u0000]*$"


def _storable(value: str) -> str:
    # Postgres text cannot hold NUL, nor UTF-8 a lone surrogate (JSON's "\\ud800" escapes
    # one): say so as a 422 instead of failing on write.
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("must not contain lone surrogates (\\ud800-\\udfff)") from exc
    return value


# The pattern tells clients (and the spec tests) what _storable enforces of NUL.
Text = Annotated[str, AfterValidator(_storable), Field(json_schema_extra={"pattern": NO_NUL})]


def _integral(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


# JSON Schema counts 925.0 as an integer; strict pydantic would not. Placed after the limits,
# or pydantic writes them into the schema as `gt`/`le` instead of JSON Schema's words.
Integral = BeforeValidator(_integral)

# What this API's page cursors look like (URL-safe base64); one that does not decode is a 422.
CURSOR = r"^[A-Za-z0-9_-]+={0,2}$"


def encode_cursor(stamp: datetime, ident: uuid.UUID) -> str:
    """An opaque, URL-safe page cursor: the (timestamp, id) of the last row of a page."""
    return base64.urlsafe_b64encode(f"{stamp.isoformat()}|{ident}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """Raises ValueError for anything `encode_cursor` did not make (binascii.Error and
    UnicodeDecodeError are ValueErrors)."""
    stamp, _, ident = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
    at = datetime.fromisoformat(stamp)
    if at.tzinfo is None:
        raise ValueError("the cursor's time has no offset")
    try:  # a forged 0001-01-01T00:00+14:00 is before year 1 in UTC: asyncpg would fail on it
        at = at.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("the cursor's time is out of range") from exc
    return at, uuid.UUID(ident)


# Bodies are taken as the schema says: no "5" for 5, no true for 1.0, no unknown fields.
STRICT = ConfigDict(extra="forbid", strict=True)


class ModelSettingsIn(BaseModel):
    model_config = STRICT

    model: Text | None = Field(default=None, max_length=200)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_answer_tokens: Annotated[int, Field(gt=0, le=1_000_000), Integral] | None = None
    context_window: Annotated[int, Field(gt=0, le=10_000_000), Integral] | None = None
    tail_budget_tokens: Annotated[int, Field(gt=0, le=10_000_000), Integral] | None = None
    compact_trigger_ratio: float | None = Field(default=None, gt=0, le=1)
    compact_target_ratio: float | None = Field(default=None, gt=0, le=1)
    # The stream validator (docs/configuration.md#the-stream-validator).
    validator: bool | None = None
    validator_word_repeats: Annotated[int, Field(ge=2, le=1000), Integral] | None = None
    validator_word_window: Annotated[int, Field(ge=2, le=10_000), Integral] | None = None
    validator_sentence_repeats: Annotated[int, Field(ge=2, le=1000), Integral] | None = None
    validator_sentence_block: Annotated[int, Field(ge=1, le=1000), Integral] | None = None
    validator_paragraph_repeats: Annotated[int, Field(ge=2, le=1000), Integral] | None = None
    validator_strip_html: bool | None = None


class CreateChat(BaseModel):
    model_config = STRICT

    user_id: Text = Field(min_length=1, max_length=200)
    title: Text = Field(default="", max_length=500)
    system_prompt: Text = Field(default="", max_length=200_000)
    settings: ModelSettingsIn = Field(default_factory=ModelSettingsIn)
    busy_policy: BusyPolicyIn = "queue"
    # An L3 snapshot of the same user (GET /v1/snapshots): the chat starts from it. (A UUID is
    # a string in JSON: not strict here.)
    from_snapshot: Annotated[uuid.UUID, Field(strict=False)] | None = None
    # The assistant the user talks to in this chat: entity types grouped by user and assistant
    # keep a card for each (docs/concepts.md, event memory).
    assistant: Text = Field(default="", max_length=100)


def _no_null_defaults(schema: dict[str, Any]) -> None:
    for field in schema.get("properties", {}).values():
        if "default" in field and field["default"] is None:
            del field["default"]


class UpdateChat(BaseModel):
    """Only the fields sent change. A field may be left out, never null: None is only the
    default (not validated, so not in the schema), and a null sent fails the type."""

    model_config = ConfigDict(**STRICT, json_schema_extra=_no_null_defaults)

    # (The types say what may be sent; None, the unsent default, is outside them on purpose.)
    title: Text = Field(default=None, max_length=500)  # type: ignore[assignment]
    system_prompt: Text = Field(default=None, max_length=200_000)  # type: ignore[assignment]
    settings: ModelSettingsIn = Field(default=None)  # type: ignore[assignment]
    busy_policy: BusyPolicyIn = Field(default=None)  # type: ignore[arg-type]


class PostMessage(BaseModel):
    model_config = STRICT

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
        "from_snapshot": str(chat.from_snapshot) if chat.from_snapshot is not None else None,
        "assistant": chat.assistant,
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


# The shapes of answers, for the OpenAPI document (routes build them with the functions above;
# the spec tests hold the two together). Fields not listed here may be added later.


class ChatOut(BaseModel):
    id: uuid.UUID
    user_id: str
    title: str
    system_prompt: str
    settings: dict[str, Any] = Field(description="only the settings the chat overrides")
    busy_policy: BusyPolicyIn
    created_at: datetime
    updated_at: datetime
    from_snapshot: uuid.UUID | None = Field(description="the L3 snapshot it started from")
    assistant: str = Field(description="the assistant the user talks to in it")


class ChatPage(BaseModel):
    chats: list[ChatOut]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page")


class MessageOut(BaseModel):
    id: uuid.UUID
    chat_id: uuid.UUID
    position: int
    kind: MessageKind
    content: str
    reasoning: str
    status: MessageStatus
    token_count: int
    usage: dict[str, Any] | None
    step_id: uuid.UUID | None
    meta: dict[str, Any]
    created_at: datetime


class HistoryPage(BaseModel):
    messages: list[MessageOut]
    has_more: bool
    first_position: int | None
    last_position: int | None


class AbortOut(BaseModel):
    aborted: bool = Field(description="whether a running step was asked to stop")
    step_id: uuid.UUID | None


class StepErrorOut(BaseModel):
    code: str
    text: str


class StepOut(BaseModel):
    """A finished step, when the client did not ask for `text/event-stream`."""

    step_id: uuid.UUID
    chat_id: uuid.UUID
    user_message_id: uuid.UUID
    assistant_message_id: uuid.UUID | None = None
    context: dict[str, Any] | None = Field(default=None, description="absent on a replay")
    status: str
    message_status: str | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, float]
    content: str
    reasoning: str
    error: StepErrorOut | None
    actions: list[dict[str, Any]] = Field(
        default_factory=list, description="each action's last runtime_action event")
    replayed: bool = Field(description="an idempotent retry: the stored outcome, not a new step")
    runtime_memory: dict[str, Any] | None = Field(
        default=None, description="the turn's L1 update (`memory`, `diff`, `version`), when it "
        "ended within JIN_L1_WAIT_S")
    runtime_patterns: dict[str, Any] | None = Field(
        default=None, description="the turn's L2 pass (`patterns`, `version`, `alerts`), when it "
        "found something and ended within JIN_L2_WAIT_S")


class SectionOut(BaseModel):
    name: str
    tokens: int
    messages: int
    ids: list[str]


class ContextOut(BaseModel):
    chat_id: uuid.UUID
    messages: list[dict[str, Any]] = Field(description="the prompt, as the model would get it")
    sections: list[SectionOut]
    total_tokens: int
    budget: dict[str, int]
    summary: MessageOut | None
    left_out: int
    would_compact: bool
    compaction: dict[str, Any]
    recalled: list[dict[str, Any]]
    recall: dict[str, Any]
    route: list[str] = Field(description="the planner's nodes for the message, in order")
    translation: dict[str, Any] | None = Field(
        description="the newest user message's translation, as the brain read it")
    answer_translation: dict[str, Any] | None = Field(
        default=None, description="the newest answer's translation into the user's language "
                                  "(`source`: the brain's own answer)")
    actions: list[dict[str, Any]] = Field(
        description="the newest answer's actions (memory tools, runtime actions), each as "
                    "its last runtime_action event")

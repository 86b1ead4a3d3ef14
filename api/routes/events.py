"""`/v1/events` and `/v1/entities`: what event memory extracted of a user, and deleting it.

Every call is scoped to the caller's tenant and the `user_id` it names: another tenant's event
or card, by any id, is not found.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api import problems
from api.deps import RuntimeDep, TenantDep
from api.problems import Problem
from api.schemas import CURSOR, Text, decode_cursor, encode_cursor
from memory.events.listing import Cursor, EventListing

router = APIRouter(tags=["events"], responses=problems.responses(401, 422, 429, 503))

UserId = Annotated[Text, Query(min_length=1, max_length=200)]
Limit = Annotated[int, Query(ge=1, le=200)]
Before = Annotated[str | None, Query(max_length=200, pattern=CURSOR,
                                     description="`next` of the previous page")]


class SummarySourceOut(BaseModel):
    id: uuid.UUID
    kept: bool = Field(description="false once purged (or deleted); the pointer stays")
    expires_at: datetime | None = Field(description="when the purge may remove it")


class EventOut(BaseModel):
    id: uuid.UUID
    chat_id: uuid.UUID | None = Field(description="null once the chat is deleted")
    type: str = Field(description="its event type (a schema's `EventType`)")
    topic: str
    properties: dict[str, Any]
    summary: str
    source_messages: list[uuid.UUID] = Field(description="the messages it was extracted from")
    started_at: datetime
    ended_at: datetime
    created_at: datetime
    compressed_into: uuid.UUID | None = Field(description="the summary it was merged into")
    expires_at: datetime | None = Field(
        description="a merged event's TTL: the purge removes it after this")
    level: str | None = Field(
        description="a summary's rung (daily, weekly, monthly, yearly); null for an event")
    compressed_from: list[uuid.UUID] = Field(description="a summary event's sources")
    sources: list[SummarySourceOut] = Field(
        description="a summary's sources, each with its expiry while kept")


class EventPage(BaseModel):
    """The user's events, newest first."""

    items: list[EventOut]
    next: str | None = Field(description="pass as `before` for the next page")


class SourceEventOut(BaseModel):
    id: uuid.UUID
    type: str | None = None
    topic: str | None = None
    summary: str | None = None
    created_at: datetime | None = None
    deleted: bool = Field(description="the event was deleted since; its id stays")


class VersionOut(BaseModel):
    version: int
    fields: dict[str, Any]
    card: str
    patch: str = Field(description="the updates that made it, as the helper wrote them")
    created_at: datetime
    source_events: list[SourceEventOut]


class EntityOut(BaseModel):
    id: uuid.UUID
    type: str = Field(description="its entity type (a schema's `EntityType`)")
    key: str | None = Field(description="its topic, for types kept one card per topic")
    fields: dict[str, Any]
    card: str
    version: int
    created_at: datetime
    updated_at: datetime
    versions: list[VersionOut] = Field(description="every version, oldest first")


class EntityPage(BaseModel):
    """The user's entity cards, last changed first."""

    items: list[EntityOut]
    next: str | None = Field(description="pass as `before` for the next page")


def _listing(runtime: RuntimeDep) -> EventListing:
    if runtime.event_listing is None:
        raise Problem(503, "memory_unavailable", "event memory is not available")
    return runtime.event_listing


def _cursor(value: str | None) -> Cursor | None:
    if value is None:
        return None
    try:
        return decode_cursor(value)
    except ValueError as exc:
        raise Problem(422, "invalid_request", "`before` is not a cursor from this API") from exc


def _page(rows: list[dict[str, Any]], limit: int, stamp: str) -> JSONResponse:
    page = rows[:limit]
    last = page[-1] if page else None
    cursor = encode_cursor(datetime.fromisoformat(last[stamp]), uuid.UUID(last["id"])) \
        if last is not None and len(rows) > limit else None
    return JSONResponse({"items": page, "next": cursor})


@router.get("/v1/events", response_model=None, responses={200: {"model": EventPage}})
async def list_events(runtime: RuntimeDep, tenant: TenantDep, user_id: UserId,
                      limit: Limit = 50, before: Before = None) -> JSONResponse:
    """The user's events, newest first, each with the messages it came from."""
    rows = await _listing(runtime).events(tenant, user_id, limit + 1, _cursor(before))
    return _page(rows, limit, "created_at")


@router.get("/v1/entities", response_model=None, responses={200: {"model": EntityPage}})
async def list_entities(runtime: RuntimeDep, tenant: TenantDep, user_id: UserId,
                        limit: Limit = 50, before: Before = None) -> JSONResponse:
    """The user's entity cards, last changed first, each with every version and the events
    behind each version."""
    rows = await _listing(runtime).entities(tenant, user_id, limit + 1, _cursor(before))
    return _page(rows, limit, "updated_at")


@router.delete("/v1/events/{event_id}", status_code=204, responses=problems.responses(404))
async def delete_event(event_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep,
                       user_id: UserId) -> Response:
    """Delete an event. The card versions it changed keep its id, marked deleted. A deleted
    summary gives its sources still kept back as events, without their TTL."""
    if not await _listing(runtime).delete_event(tenant, user_id, event_id):
        raise Problem(404, "event_not_found", f"event {event_id} does not exist")
    return Response(status_code=204)


@router.delete("/v1/entities/{entity_id}", status_code=204, responses=problems.responses(404))
async def delete_entity(entity_id: uuid.UUID, runtime: RuntimeDep, tenant: TenantDep,
                        user_id: UserId) -> Response:
    """Delete an entity card and every version of it; its events stay."""
    if not await _listing(runtime).delete_entity(tenant, user_id, entity_id):
        raise Problem(404, "entity_not_found", f"entity {entity_id} does not exist")
    return Response(status_code=204)

"""Entity cards: their fields as the prompt shows them, and a batch's updates applied to them.

A card is the entity's fields, each under a `## field` heading in its schema's order. The model
sees it with numbered lines and hints where a patch starts in those numbers; a patch applies to
its field's text alone, so the hint is moved by the lines above the field first. Each field
changes as its `Op` says; a patch that cannot apply (missing, ambiguous, too costly) is dropped
and counted like any invalid item, and the card's other updates of the batch still apply.

All updates of one batch to one card make one new version, with the events behind them. A
field reads only the events of its window (`filters.within`): an update backed only by events
that ended longer ago than that (an old chat imported, a batch extracted late) leaves the field
as it is, dropped and counted as `outside_window`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from memory.events.matcher import MatchConfig
from memory.events.patch import Block, Refused, apply_blocks, parse_patch
from memory.events.schema import EntityType, Field, Schemas
from memory.events.segments import topic_key
from memory.events.types import Dropped, Update

CardKey = tuple[str, str]  # (entity type, key): "" by user, "@name" by user and assistant, a topic


@dataclass(frozen=True)
class Card:
    """An entity card as stored: its fields by name, and its version (0: not stored yet)."""

    entity: str
    key: str
    fields: Mapping[str, Any]
    version: int = 0


@dataclass(frozen=True)
class CardChange:
    """A card's next version: the fields after the batch's updates, and what made them."""

    entity: str
    key: str
    fields: dict[str, Any]
    card: str  # rendered
    version: int  # the version it replaces (0: a new card)
    patch: str  # the updates, as the model wrote them
    sources: tuple[int, ...]  # indexes into the extraction's events
    applied: int  # how many updates made it


def card_key(update: Update) -> CardKey:
    if update.key is None or update.key.startswith("@"):  # the user's; the user's and assistant's
        return update.entity, update.key or ""
    return update.entity, topic_key(update.key)


def render(kind: EntityType, fields: Mapping[str, Any]) -> str:
    """The card's text: each field that has a value, under its heading, in schema order."""
    return "\n".join(_sections(kind, fields))


def _sections(kind: EntityType, fields: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for field in kind.fields:
        if field.name in fields and fields[field.name] not in (None, "", []):
            lines.append(f"## {field.name}")
            lines += _value_text(fields[field.name]).split("\n")
    return lines


def _value_text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(f"- {item}" for item in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def field_offset(kind: EntityType, fields: Mapping[str, Any], name: str) -> int:
    """Lines of the rendered card above the field's text (its heading included); 0 when the
    field has no value yet, and the card shows no text of it to hint at."""
    lines = 0
    for field in kind.fields:
        value = fields.get(field.name)
        if value in (None, "", []):
            continue
        lines += 1
        if field.name == name:
            return lines
        lines += _value_text(value).count("\n") + 1
    return 0


def in_window(schemas: Schemas, updates: Sequence[Update], ended: Sequence[datetime],
              now: datetime) -> tuple[list[Update], list[Dropped]]:
    """The updates with only the source events their field's `filters.within` reads (those that
    ended within that span before `now`; `ended` by event index); an update left with none is
    dropped."""
    kept: list[Update] = []
    dropped: list[Dropped] = []
    for update in updates:
        kind = schemas.entity(update.entity)
        field = kind.field(update.field) if kind is not None else None
        within = field.aggregate.filters.within if field is not None else None
        if within is None:
            kept.append(update)
            continue
        sources = tuple(i for i in update.sources if now - ended[i] <= within)
        if sources:
            kept.append(replace(update, sources=sources))
            continue
        newest = min(now - ended[i] for i in update.sources)
        dropped.append(Dropped(
            f"{update.entity}.{update.field}", "outside_window",
            f"its newest event ended {_days(newest)} ago; the field reads {_days(within)}"))
    return kept, dropped


def _days(span: timedelta) -> str:
    return f"{span.total_seconds() / 86400:.1f} days"


def apply_updates(
    schemas: Schemas, cards: Mapping[CardKey, Card], updates: Sequence[Update],
    config: MatchConfig,
) -> tuple[list[CardChange], list[Dropped]]:
    """Every card the updates change, as its next version; the updates that could not apply."""
    changes: list[CardChange] = []
    dropped: list[Dropped] = []
    grouped: dict[CardKey, list[Update]] = {}
    for update in updates:
        grouped.setdefault(card_key(update), []).append(update)
    for key, group in grouped.items():
        kind = schemas.entity(key[0])
        if kind is None:  # read_extraction keeps only known types
            continue
        before = cards.get(key) or Card(key[0], key[1], {})
        fields = dict(before.fields)
        notes: list[str] = []
        sources: set[int] = set()
        applied = 0
        for update in group:
            field = kind.field(update.field)
            if field is None:
                continue
            where = f"{key[0]}{f'[{key[1]}]' if key[1] else ''}.{field.name}"
            problem = _apply(kind, field, before.fields, fields, update.value, config)
            if problem is not None:
                dropped.append(Dropped(where, problem.reason, problem.detail))
                continue
            applied += 1
            sources.update(update.sources)
            notes.append(f"{field.name} ({field.aggregate.op}):\n{_note(update.value)}")
        if applied and fields != dict(before.fields):
            changes.append(CardChange(
                entity=key[0], key=key[1], fields=fields, card=render(kind, fields),
                version=before.version, patch="\n\n".join(notes), sources=tuple(sorted(sources)),
                applied=applied))
    return changes, dropped


@dataclass(frozen=True)
class _Problem:
    reason: str
    detail: str


def _apply(kind: EntityType, field: Field, shown: Mapping[str, Any], fields: dict[str, Any],
           value: Any, config: MatchConfig) -> _Problem | None:
    """Change `fields` in place as the field's operator says; why not, when it cannot."""
    name, op = field.name, field.aggregate.op
    old = fields.get(name)
    if op == "replace":
        fields[name] = value
    elif op == "immutable":
        if old in (None, "", []):
            fields[name] = value
    elif op == "sum":
        fields[name] = (old if isinstance(old, int | float) else 0) + value
    elif op == "append":
        items = list(old) if isinstance(old, list) else []
        items += value if isinstance(value, list) else [value]
        last = field.aggregate.filters.last
        fields[name] = items[-last:] if last else items
    elif op == "patch":
        blocks = parse_patch(value)
        if isinstance(blocks, Refused):  # read_extraction let only parseable ones through
            return _Problem("bad_patch", blocks.detail)
        # The model numbered the lines of the whole card it was shown: its hints, moved to the
        # field's own lines.
        offset = field_offset(kind, shown, name)
        moved = [Block(b.search, b.replace, b.line - offset if b.line and b.line > offset
                       else None) for b in blocks]
        done = apply_blocks(old if isinstance(old, str) else "", moved, config)
        if isinstance(done, Refused):
            return _Problem(f"patch_{done.reason}", done.detail)
        fields[name] = done.text
    else:  # TIME_COMPRESS: read_extraction drops it; compression writes it
        return _Problem("not_writable", f"{kind.name}.{name} is written by compression")
    return None


def _note(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

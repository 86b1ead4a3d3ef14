"""All schemas compiled into one extraction prompt, with a byte-stable prefix.

One helper call per batch of turns extracts every event and every entity update, instead of
one call per schema. The system message (the prefix) depends on the schemas alone: types in
name order, their properties and fields in the order their file declares them, no time, no
batch. The same schemas give the same bytes, so the model server's prefix cache stays warm
from batch to batch; everything that changes (the candidate cards, the turns) follows it in the
user message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from memory.events.patch import REPLACE, SEARCH, SPLIT
from memory.events.schema import EntityType, EventType, Field, Property, Schemas, Window
from memory.events.types import Candidate, Turn

_INTRO = f"""You extract memory from a conversation between a user and an assistant. Answer \
with one JSON object and nothing else.

## What to do

1. Segments. Split the numbered turns into pieces by topic: {{"start": first turn, "end": last \
turn, "topic": a short name}}. When the talk comes back to a topic, give the new piece the \
same topic name: the pieces of one topic make one event. Leave out turns with nothing worth \
remembering.
2. Events. For each topic, what happened, as events of the types below: {{"type": an event \
type, "topic": a segment's topic, "properties": {{...}}}}. Only these types, only what the \
turns say; dates as YYYY-MM-DD.
3. Entities. Changes to the entity cards, one item per field: {{"entity": an entity type, \
"key": the card's topic (only for types kept one card per topic), "field": a field, "value": \
as its Op says, "events": [indexes into your "events" list of the events behind the change]}}. \
A field changes only through the event types it lists.

## How a field changes (Op)

- replace: "value" is the new value.
- patch: "value" is text of one or more blocks, applied in order to the card shown below:
{SEARCH}
:start_line: the card's line where the search starts
lines copied exactly from the card, without their "N| " numbers
{SPLIT}
the lines that take their place
{REPLACE}
  Copy enough lines that the search fits one place only. A block with nothing between its \
first two markers adds its lines at the end: write a new card that way, one block or several.
- sum: "value" is a number to add.
- append: "value" is an item, or a list of items, to add at the end.
- immutable: "value" is set once; a card that has one keeps it.
- TIME_COMPRESS: written by compression; never write it.

## Answer

{{"segments": [...], "events": [...], "entities": [...]}}
Empty lists when nothing is worth remembering."""


@dataclass(frozen=True)
class Prompt:
    prefix: str  # the system message, the same bytes for the same schemas
    digest: str  # the prefix's SHA-256, short: which prompt a batch was extracted with


def compile_prompt(schemas: Schemas) -> Prompt:
    """The system message for these schemas."""
    parts = [_INTRO, "## Event types"]
    parts += [_event(e) for e in schemas.events]
    parts.append("## Entity types")
    parts += [_entity(e) for e in schemas.entities]
    prefix = "\n\n".join(parts) + "\n"
    return Prompt(prefix, hashlib.sha256(prefix.encode()).hexdigest()[:16])


def render_batch(turns: Sequence[Turn], candidates: Sequence[Candidate]) -> str:
    """The user message: the cards the model may patch, then the turns, by their indexes."""
    lines = ["## Entity cards"]
    if not candidates:
        lines.append("(none yet: write new cards with blocks whose search is empty)")
    for card in candidates:
        lines.append(f"### {card.entity}" + (f": {card.key}" if card.key else ""))
        lines += [f"{n}| {line}" for n, line in enumerate(card.text.split("\n"), start=1)]
    lines.append("## Turns")
    for turn in turns:
        body = turn.text.strip().replace("\n", "\n    ")
        lines.append(f"[{turn.index}] {turn.role}: {body}")
    return "\n".join(lines) + "\n"


def messages(prompt: Prompt, turns: Sequence[Turn],
             candidates: Sequence[Candidate]) -> list[dict[str, str]]:
    """The helper call's messages: the stable prefix first, the batch after it."""
    return [{"role": "system", "content": prompt.prefix},
            {"role": "user", "content": render_batch(turns, candidates)}]


def _event(kind: EventType) -> str:
    lines = [f"### {kind.name}", kind.description]
    lines += [_property(p) for p in kind.properties]
    return "\n".join(lines)


def _property(prop: Property) -> str:
    notes = [_type(prop.type, prop.values)] + (["required"] if prop.required else [])
    return f"- {prop.name} ({'; '.join(notes)}): {prop.description}"


def _entity(kind: EntityType) -> str:
    grouping = {"user": "one card per user", "user_and_assistant":
                "one card per user and assistant", "topic": "one card per topic: give its key"}
    lines = [f"### {kind.name} ({grouping[kind.keys]})", kind.description]
    lines += [_field(f) for f in kind.fields]
    return "\n".join(lines)


def _field(field: Field) -> str:
    if not field.writable:
        return f"- {field.name} ({field.type}; TIME_COMPRESS: not yours): {field.description}"
    notes = [_type(field.type, field.values), field.aggregate.op,
             _window(field.aggregate.filters)]
    return f"- {field.name} ({'; '.join(notes)}): {field.description}"


def _type(type_: str, values: tuple[str, ...]) -> str:
    return f"{type_}, one of: {', '.join(values)}" if values else type_


def _window(window: Window) -> str:
    text = f"from {', '.join(window.events)}"
    if window.last is not None:
        text += f", the newest {window.last}"
    if window.within is not None:
        text += f", within {_duration(window.within)}"
    return text


def _duration(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    for size, unit in ((7 * 24 * 60, "week"), (24 * 60, "day"), (60, "hour"), (1, "minute")):
        if minutes % size == 0:
            count = minutes // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{minutes} minutes"  # unreachable: every duration is whole minutes

"""The extraction model's answer, checked against the schemas item by item.

An item that does not fit is dropped and counted with a reason; the others are kept: one bad
item never loses the batch (OpenViking #3339: one unresolvable item aborted the whole pass). An
answer that is not JSON at all is one dropped item too, `not_json` (`truncated` when the token
cap cut it), so an extraction that yields nothing is always counted with why (OpenViking #4580,
#455: silently 0 memories).

The answer's shape (the prompt, prompt.py, asks for it):

    {"segments": [{"start": 0, "end": 3, "topic": "recursion"}, ...],
     "events":   [{"type": "discussion", "topic": "recursion", "properties": {...}}, ...],
     "entities": [{"entity": "task", "key": "jin release", "field": "status",
                   "value": "done", "events": [0]}, ...]}

An entity update names the events behind it (indexes into `events`); at least one must be of
a type the field's `filters.events` lists, else the update is dropped: a field changes only by
the events its schema says. Events of one type and one topic merge into one event.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from datetime import date, datetime
from typing import Any, TypeGuard, cast

from memory.events.patch import Refused, parse_patch
from memory.events.schema import EventType, Schemas
from memory.events.segments import assistant_key, topic_key, topics
from memory.events.types import Dropped, Event, Extraction, Segment, Topic, Update


def read_extraction(answer: str, schemas: Schemas, turns: Collection[int], *,
                    cut: bool = False, assistant: str = "") -> Extraction:
    """The valid part of the model's answer; `turns` are the indexes of the turns it was shown,
    `cut` says the token cap ended the answer (its JSON then is dropped as `truncated`), and
    `assistant` is the batch's chat's (the card of a type grouped by user and assistant)."""
    dropped: list[Dropped] = []
    data = _json_object(answer, dropped, "truncated" if cut else "not_json")
    segments = [s for n, raw in enumerate(_section(data, "segments", dropped))
                if (s := _segment(f"segments[{n}]", raw, turns, dropped)) is not None]
    found = topics(segments)
    by_key = {topic_key(t.name): t for t in found}
    events: list[Event] = []
    index_of: dict[int, int] = {}  # the answer's event index -> the kept (merged) event's
    merged: dict[tuple[str, str], int] = {}
    for n, raw in enumerate(_section(data, "events", dropped)):
        event = _event(f"events[{n}]", raw, schemas, by_key, dropped)
        if event is None:
            continue
        same = (event.type, topic_key(event.topic))
        if same in merged:
            first = events[merged[same]]
            events[merged[same]] = Event(first.type, first.topic, first.spans,
                                         {**event.properties, **first.properties})
        else:
            merged[same] = len(events)
            events.append(event)
        index_of[n] = merged[same]
    updates = [u for n, raw in enumerate(_section(data, "entities", dropped))
               if (u := _update(f"entities[{n}]", raw, schemas, events, index_of, dropped,
                                 assistant))
               is not None]
    return Extraction(topics=found, events=tuple(events), updates=tuple(updates),
                      dropped=tuple(dropped))


def _json_object(answer: str, dropped: list[Dropped], why: str) -> dict[str, Any]:
    """The first JSON object in the answer: models wrap it in prose or a ``` fence. `why` is
    the reason an answer without one is dropped for."""
    start = answer.find("{")
    if start < 0:
        dropped.append(Dropped("", why, f"no JSON object in {len(answer)} characters"))
        return {}
    try:
        data, _ = json.JSONDecoder().raw_decode(answer, start)
    except json.JSONDecodeError as exc:
        dropped.append(Dropped("", why, str(exc)))
        return {}
    return cast(dict[str, Any], data)  # what starts at a "{" decodes to an object


def _section(data: dict[str, Any], name: str, dropped: list[Dropped]) -> list[Any]:
    value = data.get(name, [])
    if isinstance(value, list):
        return value
    dropped.append(Dropped(name, "not_a_list", f"is a {type(value).__name__}"))
    return []


def _segment(path: str, raw: Any, turns: Collection[int],
             dropped: list[Dropped]) -> Segment | None:
    if not isinstance(raw, dict):
        dropped.append(Dropped(path, "not_an_object", repr(raw)[:80]))
        return None
    start, end, topic = raw.get("start"), raw.get("end"), raw.get("topic")
    if not isinstance(topic, str) or not topic_key(topic):
        dropped.append(Dropped(f"{path}.topic", "missing_topic", repr(topic)[:80]))
        return None
    if not (_whole(start) and _whole(end) and start <= end):
        dropped.append(Dropped(path, "bad_span", f"start {start!r}, end {end!r}"))
        return None
    if not turns or start < min(turns) or end > max(turns):
        shown = f"{min(turns)}-{max(turns)}" if turns else "none"
        dropped.append(Dropped(path, "bad_span", f"{start}-{end} is outside the turns ({shown})"))
        return None
    return Segment(start, end, topic)


def _event(path: str, raw: Any, schemas: Schemas, by_key: dict[str, Topic],
           dropped: list[Dropped]) -> Event | None:
    if not isinstance(raw, dict):
        dropped.append(Dropped(path, "not_an_object", repr(raw)[:80]))
        return None
    kind = schemas.event(str(raw.get("type")))
    if kind is None:
        dropped.append(Dropped(f"{path}.type", "unknown_event_type", repr(raw.get("type"))[:80]))
        return None
    topic = by_key.get(topic_key(str(raw.get("topic") or "")))
    if topic is None:
        dropped.append(Dropped(f"{path}.topic", "unknown_topic",
                               f"{raw.get('topic')!r} names no segment"))
        return None
    properties = _properties(path, kind, raw.get("properties"), dropped)
    return None if properties is None else Event(kind.name, topic.name, topic.spans, properties)


def _properties(path: str, kind: EventType, raw: Any,
                dropped: list[Dropped]) -> dict[str, Any] | None:
    """The event's valid properties; None (the event dropped) when a required one is not."""
    given = raw if isinstance(raw, dict) else {}
    kept: dict[str, Any] = {}
    for name, value in given.items():
        prop = kind.property(str(name))
        if prop is None:
            dropped.append(Dropped(f"{path}.properties.{name}", "unknown_property",
                                   f"{kind.name} has no property {name!r}"))
            continue
        if value is None:
            continue
        problem = value_problem(prop.type, prop.values, value)
        if problem is None:
            kept[prop.name] = value
        elif prop.required:
            dropped.append(Dropped(f"{path}.properties.{name}", "wrong_type", problem))
            return None
        else:
            dropped.append(Dropped(f"{path}.properties.{name}", "wrong_type", problem))
    missing = [p.name for p in kind.properties if p.required and p.name not in kept]
    if missing:
        dropped.append(Dropped(f"{path}.properties", "missing_property",
                               f"{kind.name} needs {', '.join(missing)}"))
        return None
    return kept


def _update(path: str, raw: Any, schemas: Schemas, events: list[Event],
            index_of: dict[int, int], dropped: list[Dropped], assistant: str) -> Update | None:
    if not isinstance(raw, dict):
        dropped.append(Dropped(path, "not_an_object", repr(raw)[:80]))
        return None
    kind = schemas.entity(str(raw.get("entity")))
    if kind is None:
        dropped.append(Dropped(f"{path}.entity", "unknown_entity_type",
                               repr(raw.get("entity"))[:80]))
        return None
    field = kind.field(str(raw.get("field")))
    if field is None:
        dropped.append(Dropped(f"{path}.field", "unknown_field",
                               f"{kind.name} has no field {raw.get('field')!r}"))
        return None
    if not field.writable:
        dropped.append(Dropped(f"{path}.field", "not_writable",
                               f"{kind.name}.{field.name} is {field.aggregate.op}: written by "
                               "compression, not extraction"))
        return None
    if kind.keys == "user":
        key = None  # the user of the batch: nothing to name
    elif kind.keys == "user_and_assistant":
        key = assistant_key(assistant)  # the batch's chat's: nothing for the model to name
    elif isinstance(raw.get("key"), str) and topic_key(raw["key"]):
        key = topic_key(raw["key"])
    else:
        dropped.append(Dropped(f"{path}.key", "missing_key",
                               f"{kind.name} cards are one per topic: name the topic"))
        return None
    cited = raw.get("events")
    cited = cited if isinstance(cited, list) else []
    sources = tuple(sorted({index_of[c] for c in cited if _whole(c) and c in index_of
                            and events[index_of[c]].type in field.aggregate.filters.events}))
    if not sources:
        dropped.append(Dropped(f"{path}.events", "no_source_event",
                               f"cites {cited!r}; {kind.name}.{field.name} changes only by "
                               f"{', '.join(field.aggregate.filters.events)} events"))
        return None
    value = raw.get("value")
    problem = op_problem(field.aggregate.op, field.type, field.values, value)
    if problem is not None:
        reason = "bad_patch" if field.aggregate.op == "patch" else "wrong_type"
        dropped.append(Dropped(f"{path}.value", reason, problem))
        return None
    return Update(entity=kind.name, key=key, field=field.name, op=field.aggregate.op,
                  value=value, sources=sources)


def op_problem(op: str, type_: str, values: tuple[str, ...], value: Any) -> str | None:
    """Why `value` cannot go through the operator into a field of that type, or None."""
    if op == "patch":
        if not isinstance(value, str):
            return f"a patch is text of SEARCH/REPLACE blocks, not {type(value).__name__}"
        parsed = parse_patch(value)
        return parsed.detail if isinstance(parsed, Refused) else None
    if op == "sum":
        return value_problem(type_, (), value)
    if op == "append" and type_ == "list[string]" and isinstance(value, str):
        return value_problem("string", values, value)
    return value_problem(type_, values, value)


def value_problem(type_: str, values: tuple[str, ...], value: Any) -> str | None:
    """Why `value` is not of the schema type, or None."""
    got = type(value).__name__
    if type_ == "string":
        if not isinstance(value, str) or not value.strip():
            return f"wants text, got {got}"
        if values and value not in values:
            return f"{value!r} is not one of {', '.join(values)}"
    elif type_ == "integer":
        if not _whole(value):
            return f"wants a whole number, got {got}"
    elif type_ == "number":
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            return f"wants a number, got {got}"
    elif type_ == "boolean":
        if not isinstance(value, bool):
            return f"wants true or false, got {got}"
    elif type_ in ("date", "datetime"):
        parse = date.fromisoformat if type_ == "date" else datetime.fromisoformat
        try:
            parse(value)
        except (TypeError, ValueError):
            return f"wants an ISO {type_} (YYYY-MM-DD{'Thh:mm' if type_ == 'datetime' else ''})"
    elif type_ == "list[string]":
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            return f"wants a list of texts, got {got}"
    return None


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)

"""Event and entity types, declared in YAML and checked at load.

An event type (`EventType`, `Description`, `Properties`) is a kind of discrete, time-stamped
record. An entity type (`EntityType`, `Description`, `Fields`) is evolving state; each field's
`AggregateExpression` says which events update it (`filters`), how the cards are grouped
(`keys`) and how a new value meets the old one (`Op`). The defaults ship in `schemas/` beside
this module; a deployment adds its own with `JIN_MEMORY_SCHEMAS=dir` (its types replace the
defaults of the same name). Any mistake stops the load with a `SchemaError` that names the
file, the field and the problem: a schema that half loads would extract half silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Any, Literal, cast, get_args

import yaml

from memory.events import SchemaError

PropertyType = Literal["string", "integer", "number", "boolean", "date", "datetime", "list[string]"]
Keys = Literal["user", "user_and_assistant", "topic"]
Op = Literal["replace", "patch", "sum", "append", "immutable", "TIME_COMPRESS"]

PROPERTY_TYPES: tuple[str, ...] = get_args(PropertyType)
KEYS: tuple[str, ...] = get_args(Keys)
OPS: tuple[str, ...] = get_args(Op)
# The types each operator can merge; an operator missing here takes any type.
OP_TYPES: dict[str, tuple[str, ...]] = {
    "sum": ("integer", "number"),
    "patch": ("string",),
    "append": ("string", "list[string]"),
    "TIME_COMPRESS": ("string",),
}
NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
DURATION = re.compile(r"^(\d+)\s*([mhdw])$")
UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@dataclass(frozen=True)
class Property:
    name: str
    type: PropertyType
    description: str
    required: bool = False
    values: tuple[str, ...] = ()  # a string property's allowed values; empty: any


@dataclass(frozen=True)
class EventType:
    name: str
    description: str
    properties: tuple[Property, ...]
    source: str  # the file it came from, for messages

    def property(self, name: str) -> Property | None:
        return next((p for p in self.properties if p.name == name), None)


@dataclass(frozen=True)
class Window:
    """The events a field reads: of these types, and only the newest (`within`, `last`)."""

    events: tuple[str, ...]
    within: timedelta | None = None
    last: int | None = None


@dataclass(frozen=True)
class Aggregate:
    keys: Keys
    filters: Window
    op: Op


@dataclass(frozen=True)
class Field:
    name: str
    type: PropertyType
    description: str
    aggregate: Aggregate
    values: tuple[str, ...] = ()

    @property
    def writable(self) -> bool:
        """Whether extraction writes it: TIME_COMPRESS fields are written by compression."""
        return self.aggregate.op != "TIME_COMPRESS"


@dataclass(frozen=True)
class EntityType:
    name: str
    description: str
    fields: tuple[Field, ...]
    source: str

    @property
    def keys(self) -> Keys:
        """How its cards are grouped (one value for all fields: checked at load)."""
        return self.fields[0].aggregate.keys

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class Schemas:
    """Every type in force, each kind sorted by name, so anything built from it is stable."""

    events: tuple[EventType, ...]
    entities: tuple[EntityType, ...]

    def event(self, name: str) -> EventType | None:
        return next((e for e in self.events if e.name == name), None)

    def entity(self, name: str) -> EntityType | None:
        return next((e for e in self.entities if e.name == name), None)


def default_files() -> list[tuple[str, str]]:
    """The schemas shipped with jin: (label, YAML text), by file name."""
    folder = resources.files("memory.events") / "schemas"
    found = [f for f in folder.iterdir() if f.name.endswith((".yaml", ".yml"))]
    return [(f"memory/events/schemas/{f.name}", f.read_text("utf-8"))
            for f in sorted(found, key=lambda f: f.name)]


def folder_files(folder: Path) -> list[tuple[str, str]]:
    """A deployment's schema folder: its *.yaml and *.yml files, by name."""
    if not folder.is_dir():
        raise SchemaError(str(folder), "(folder)", "is not a folder")
    found = sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    return [(str(p), p.read_text("utf-8")) for p in found]


def load_schemas(extra: Path | None = None) -> Schemas:
    """The defaults, with the types of `extra` (JIN_MEMORY_SCHEMAS) replacing same-named ones."""
    defaults = parse_files(default_files())
    if extra is None:
        return check_links(defaults)
    own = parse_files(folder_files(extra))
    events = {e.name: e for e in defaults.events} | {e.name: e for e in own.events}
    entities = {e.name: e for e in defaults.entities} | {e.name: e for e in own.entities}
    return check_links(Schemas(events=tuple(events[n] for n in sorted(events)),
                               entities=tuple(entities[n] for n in sorted(entities))))


def parse_files(files: Iterable[tuple[str, str]]) -> Schemas:
    """Types from (label, YAML text) pairs; a file may hold several documents (`---`)."""
    events: dict[str, EventType] = {}
    entities: dict[str, EntityType] = {}
    for label, text in files:
        try:
            documents = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            raise SchemaError(label, "(yaml)", str(exc).replace("\n", " ")) from exc
        for n, doc in enumerate(documents):
            where = label if len(documents) == 1 else f"{label} (document {n + 1})"
            parsed = parse_document(where, doc)
            seen: Mapping[str, EventType | EntityType]
            seen = events if isinstance(parsed, EventType) else entities
            if parsed.name in seen:
                kind = "EventType" if isinstance(parsed, EventType) else "EntityType"
                raise SchemaError(where, kind,
                                  f"{parsed.name!r} is also declared in {seen[parsed.name].source}")
            if isinstance(parsed, EventType):
                events[parsed.name] = parsed
            else:
                entities[parsed.name] = parsed
    return Schemas(events=tuple(events[n] for n in sorted(events)),
                   entities=tuple(entities[n] for n in sorted(entities)))


def parse_document(file: str, doc: object) -> EventType | EntityType:
    """One YAML document: an event type or an entity type."""
    if not isinstance(doc, dict):
        raise SchemaError(file, "(document)", "must be a mapping with EventType or EntityType")
    if "EventType" in doc and "EntityType" in doc:
        raise SchemaError(file, "(document)", "declares both EventType and EntityType")
    if "EventType" in doc:
        _only(file, "", doc, {"EventType", "Description", "Properties"})
        name = _name(file, "EventType", doc["EventType"])
        props = _mapping(file, "Properties", doc.get("Properties"), required=True)
        return EventType(
            name=name, description=_text(file, "Description", doc.get("Description")),
            properties=tuple(_property(file, f"Properties.{k}", k, v) for k, v in props.items()),
            source=file)
    if "EntityType" in doc:
        _only(file, "", doc, {"EntityType", "Description", "Fields"})
        name = _name(file, "EntityType", doc["EntityType"])
        raw = _mapping(file, "Fields", doc.get("Fields"), required=True)
        fields = tuple(_field(file, f"Fields.{k}", k, v) for k, v in raw.items())
        keys = {f.aggregate.keys for f in fields}
        if len(keys) > 1:
            odd = next(f for f in fields if f.aggregate.keys != fields[0].aggregate.keys)
            raise SchemaError(file, f"Fields.{odd.name}.AggregateExpression.keys",
                              f"is {odd.aggregate.keys!r} but {fields[0].name!r} groups by "
                              f"{fields[0].aggregate.keys!r}: one entity type has one grouping")
        return EntityType(name=name, description=_text(file, "Description", doc.get("Description")),
                          fields=fields, source=file)
    raise SchemaError(file, "(document)", "has neither EventType nor EntityType")


def check_links(schemas: Schemas) -> Schemas:
    """Every field's `filters.events` names a declared event type."""
    known = {e.name for e in schemas.events}
    for entity in schemas.entities:
        for field in entity.fields:
            for name in field.aggregate.filters.events:
                if name not in known:
                    raise SchemaError(
                        entity.source, f"Fields.{field.name}.AggregateExpression.filters.events",
                        f"names {name!r}, which is no declared EventType "
                        f"(known: {', '.join(sorted(known)) or 'none'})")
    return schemas


def _property(file: str, at: str, name: object, raw: object) -> Property:
    name = _name(file, at, name)
    spec = _mapping(file, at, raw, required=True)
    _only(file, at, spec, {"Type", "Description", "Required", "Values"})
    type_ = _type(file, f"{at}.Type", spec.get("Type"))
    required = spec.get("Required", False)
    if not isinstance(required, bool):
        raise SchemaError(file, f"{at}.Required", f"must be true or false, not {required!r}")
    return Property(name=name, type=type_,
                    description=_text(file, f"{at}.Description", spec.get("Description")),
                    required=required, values=_values(file, at, type_, spec.get("Values")))


def _field(file: str, at: str, name: object, raw: object) -> Field:
    name = _name(file, at, name)
    spec = _mapping(file, at, raw, required=True)
    _only(file, at, spec, {"Type", "Description", "AggregateExpression", "Values"})
    type_ = _type(file, f"{at}.Type", spec.get("Type"))
    agg_at = f"{at}.AggregateExpression"
    agg = _mapping(file, agg_at, spec.get("AggregateExpression"), required=True)
    _only(file, agg_at, agg, {"keys", "filters", "Op"})
    keys = agg.get("keys")
    if keys not in KEYS:
        raise SchemaError(file, f"{agg_at}.keys", f"must be one of {', '.join(KEYS)}, not {keys!r}")
    op = agg.get("Op")
    if op not in OPS:
        raise SchemaError(file, f"{agg_at}.Op", f"must be one of {', '.join(OPS)}, not {op!r}")
    if op in OP_TYPES and type_ not in OP_TYPES[op]:
        raise SchemaError(file, f"{agg_at}.Op", f"{op} cannot merge a {type_} field "
                          f"(it takes {' or '.join(OP_TYPES[op])})")
    filters = _window(file, f"{agg_at}.filters", agg.get("filters"))
    return Field(name=name, type=type_,
                 description=_text(file, f"{at}.Description", spec.get("Description")),
                 aggregate=Aggregate(keys=cast(Keys, keys), op=cast(Op, op), filters=filters),
                 values=_values(file, at, type_, spec.get("Values")))


def _window(file: str, at: str, raw: object) -> Window:
    spec = _mapping(file, at, raw, required=True)
    _only(file, at, spec, {"events", "within", "last"})
    events = spec.get("events")
    if not isinstance(events, list) or not events:
        raise SchemaError(file, f"{at}.events", "must list the event types that update the field")
    names = tuple(_name(file, f"{at}.events", e) for e in events)
    within = spec.get("within")
    span: timedelta | None = None
    if within is not None:
        match = DURATION.match(str(within).strip())
        if not match or int(match.group(1)) == 0:
            raise SchemaError(file, f"{at}.within",
                              f"must be a duration such as 90m, 12h, 30d or 4w, not {within!r}")
        span = timedelta(**{UNITS[match.group(2)]: int(match.group(1))})
    last = spec.get("last")
    if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 1):
        raise SchemaError(file, f"{at}.last", f"must be a whole number above 0, not {last!r}")
    return Window(events=names, within=span, last=last)


def _values(file: str, at: str, type_: str, raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    if type_ != "string":
        raise SchemaError(file, f"{at}.Values", f"only a string can list Values, not a {type_}")
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) and v for v in raw):
        raise SchemaError(file, f"{at}.Values", "must be a list of non-empty strings")
    return tuple(raw)


def _type(file: str, at: str, raw: object) -> PropertyType:
    if raw not in PROPERTY_TYPES:
        raise SchemaError(file, at, f"must be one of {', '.join(PROPERTY_TYPES)}, not {raw!r}")
    return cast(PropertyType, raw)


def _name(file: str, at: str, raw: object) -> str:
    if not isinstance(raw, str) or not NAME.match(raw):
        raise SchemaError(file, at, f"{raw!r} is not a name: lowercase letters, digits and _, "
                          "starting with a letter, at most 64")
    return raw


def _text(file: str, at: str, raw: object) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise SchemaError(file, at, "is missing: say in words what it is, the model reads it")
    return " ".join(raw.split())


def _mapping(file: str, at: str, raw: object, required: bool) -> dict[str, Any]:
    if raw is None and required:
        raise SchemaError(file, at, "is missing")
    if not isinstance(raw, dict) or (required and not raw):
        raise SchemaError(file, at, "must be a non-empty mapping")
    return cast(dict[str, Any], raw)


def _only(file: str, at: str, spec: Mapping[str, Any], allowed: set[str]) -> None:
    for key in spec:
        if key not in allowed:
            where = f"{at}.{key}" if at else str(key)
            known = ", ".join(sorted(allowed))
            raise SchemaError(file, where, f"is not a known key (known: {known})")

"""Event and entity schemas: the defaults load, a deployment's folder adds its own through
JIN_MEMORY_SCHEMAS, and a mistake stops the load naming the file, the field and the problem."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from api.settings import Settings
from memory.events import SchemaError
from memory.events.schema import load_schemas

PET = """
EventType: vaccination
Description: A pet gets a vaccine.
Properties:
  pet: {Type: string, Description: the pet's name, Required: true}
---
EntityType: pet
Description: A pet of the user.
Fields:
  health:
    Type: string
    Description: the pet's health record
    AggregateExpression:
      keys: topic
      filters: {events: [vaccination], within: 52w}
      Op: patch
"""


def test_the_defaults_ship_a_profile_preferences_and_tasks() -> None:
    schemas = load_schemas()
    assert [e.name for e in schemas.entities] == ["preferences", "task", "user_profile"]
    assert {e.name for e in schemas.events} >= {"profile_fact", "preference_stated", "task_update"}
    task = schemas.entity("task")
    assert task is not None and task.keys == "topic"
    assert {f.name: f.aggregate.op for f in task.fields} == {
        "status": "replace", "started_on": "immutable", "progress": "patch",
        "hours_spent": "sum", "log": "append"}
    profile = schemas.entity("user_profile")
    assert profile is not None and profile.keys == "user"
    history = profile.field("history")
    assert history is not None and history.aggregate.op == "TIME_COMPRESS"
    assert not history.writable and history.aggregate.filters.within == timedelta(days=365)


def test_a_deployments_folder_adds_types_and_replaces_same_named_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pets.yaml").write_text(PET)
    (tmp_path / "prefs.yml").write_text("""
EntityType: preferences
Description: Only food preferences.
Fields:
  food:
    Type: list[string]
    Description: foods the user likes
    AggregateExpression: {keys: user, filters: {events: [preference_stated], last: 20}, Op: append}
""")
    (tmp_path / "notes.txt").write_text("not a schema")
    monkeypatch.setenv("JIN_MEMORY_SCHEMAS", str(tmp_path))
    settings = Settings()
    assert settings.memory_schemas == tmp_path
    schemas = load_schemas(settings.memory_schemas)
    pet = schemas.entity("pet")
    assert pet is not None and pet.source == f"{tmp_path / 'pets.yaml'} (document 2)"
    assert pet.fields[0].aggregate.filters.within == timedelta(weeks=52)
    prefs = schemas.entity("preferences")
    assert prefs is not None and [f.name for f in prefs.fields] == ["food"]
    assert schemas.entity("task") is not None  # the other defaults stay
    monkeypatch.setenv("JIN_MEMORY_SCHEMAS", "")  # as a compose file's ${VAR:-} sets it
    assert Settings().memory_schemas is None


def test_a_broken_folder_stops_the_settings_with_the_file_and_field(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pets.yaml").write_text(PET.replace("Op: patch", "Op: merge"))
    monkeypatch.setenv("JIN_MEMORY_SCHEMAS", str(tmp_path))
    with pytest.raises(ValidationError) as caught:
        Settings()
    message = str(caught.value)
    assert "memory_schemas" in message and "pets.yaml" in message
    assert "Fields.health.AggregateExpression.Op" in message and "'merge'" in message
    monkeypatch.setenv("JIN_MEMORY_SCHEMAS", str(tmp_path / "nowhere"))
    with pytest.raises(ValidationError, match="is not a folder"):
        Settings()


@pytest.mark.parametrize(("change", "field", "problem"), [
    (("Op: patch", "Op: sum"), "Fields.health.AggregateExpression.Op",
     "sum cannot merge a string field"),
    (("keys: topic", "keys: everyone"), "Fields.health.AggregateExpression.keys",
     "must be one of user, user_and_assistant, topic"),
    (("events: [vaccination]", "events: [vaccinaton]"),
     "Fields.health.AggregateExpression.filters.events", "'vaccinaton', which is no declared"),
    (("within: 52w", "within: a year"), "Fields.health.AggregateExpression.filters.within",
     "must be a duration"),
    (("Description: A pet of the user.\n", ""), "Description", "is missing"),
    (("    Description: the pet's health", "    Descripton: the pet's health"),
     "Fields.health.Descripton", "is not a known key"),
    (("Type: string, Description: the pet's name", "Type: text, Description: the pet's name"),
     "Properties.pet.Type", "must be one of string, integer"),
    (("EventType: vaccination", "EventType: Vaccination!"), "EventType", "is not a name"),
    (("Required: true", "Required: yes please"), "Properties.pet.Required", "true or false"),
    (("Properties:\n  pet: {Type: string, Description: the pet's name, Required: true}",
      "Properties: []"), "Properties", "non-empty mapping"),
    (("pet: {", "pet: {{"), "(yaml)", ""),
])
def test_each_mistake_names_the_file_the_field_and_the_problem(
        tmp_path: Path, change: tuple[str, str], field: str, problem: str) -> None:
    old, new = change
    assert old in PET
    (tmp_path / "pets.yaml").write_text(PET.replace(old, new, 1))
    with pytest.raises(SchemaError) as caught:
        load_schemas(tmp_path)
    assert caught.value.file.startswith(str(tmp_path / "pets.yaml"))
    assert caught.value.field == field
    assert problem in caught.value.problem


def test_the_same_type_twice_in_one_folder_names_both_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(PET)
    (tmp_path / "b.yaml").write_text(PET.split("---")[0])
    with pytest.raises(SchemaError, match=r"b\.yaml.*'vaccination' is also declared in .*a\.yaml"):
        load_schemas(tmp_path)


def test_fields_of_one_entity_group_by_one_key(tmp_path: Path) -> None:
    (tmp_path / "pets.yaml").write_text(PET + """
  weight:
    Type: number
    Description: the pet's weight in kg
    AggregateExpression: {keys: user, filters: {events: [vaccination]}, Op: replace}
""")
    with pytest.raises(SchemaError) as caught:
        load_schemas(tmp_path)
    assert caught.value.field == "Fields.weight.AggregateExpression.keys"
    assert "one entity type has one grouping" in caught.value.problem

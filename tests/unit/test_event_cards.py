"""Entity cards: how the model sees them, and a batch's updates applied by each field's Op."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from memory.events.cards import Card, apply_updates, field_offset, in_window, render
from memory.events.matcher import MatchConfig
from memory.events.schema import Op, load_schemas
from memory.events.types import Update

SCHEMAS = load_schemas()
PROFILE = SCHEMAS.entity("user_profile")
TASK = SCHEMAS.entity("task")


def update(entity: str, field: str, op: Op, value: Any, key: str | None = None,
           sources: tuple[int, ...] = (0,)) -> Update:
    return Update(entity=entity, key=key, field=field, op=op, value=value, sources=sources)


def block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


def test_a_card_shows_each_field_with_a_value_under_its_heading_in_schema_order() -> None:
    assert PROFILE is not None
    fields = {"nickname": "Sasha", "card": "- Lives in Kyiv\n- Nurse"}
    assert render(PROFILE, fields) == "## card\n- Lives in Kyiv\n- Nurse\n## nickname\nSasha"
    assert field_offset(PROFILE, fields, "card") == 1
    assert field_offset(PROFILE, fields, "nickname") == 4
    assert field_offset(PROFILE, {}, "card") == 0


def test_a_patch_hinted_in_the_cards_numbers_applies_to_its_field() -> None:
    card = Card("user_profile", "", {"card": "- A\n- Lives in Kyiv\n- A", "nickname": "S"}, 3)
    # "- A" is in two places: the model's line 4 of the card as shown ("## card" is line 1)
    # is the field's line 3, the second; unmoved, the hint would fit neither and be refused.
    changes, dropped = apply_updates(SCHEMAS, {("user_profile", ""): card}, [
        update("user_profile", "card", "patch", block("4| - A", "- B")),
    ], MatchConfig())
    assert dropped == []
    [change] = changes
    assert change.fields == {"card": "- A\n- Lives in Kyiv\n- B", "nickname": "S"}
    assert (change.version, change.sources, change.applied) == (3, (0,), 1)
    assert change.card.startswith("## card\n- A\n- Lives in Kyiv\n- B")


def test_a_patch_that_fits_nowhere_is_dropped_and_the_cards_other_updates_apply() -> None:
    card = Card("user_profile", "", {"card": "- Lives in Kyiv"}, 1)
    changes, dropped = apply_updates(SCHEMAS, {("user_profile", ""): card}, [
        update("user_profile", "card", "patch", block("- Owns a boat", "- Sold the boat")),
        update("user_profile", "nickname", "replace", "Sasha", sources=(2,)),
    ], MatchConfig())
    assert [(d.path, d.reason) for d in dropped] == [("user_profile.card", "patch_missing")]
    [change] = changes
    assert change.fields == {"card": "- Lives in Kyiv", "nickname": "Sasha"}
    assert change.sources == (2,)  # only the events of the updates that applied


def test_a_new_card_written_as_several_blocks_keeps_every_block() -> None:
    patch = block("", "- Lives in Kyiv") + "\n" + block("", "- Nurse")
    [change], _ = apply_updates(SCHEMAS, {}, [update("user_profile", "card", "patch", patch)],
                                MatchConfig())
    assert change.fields["card"] == "- Lives in Kyiv\n- Nurse" and change.version == 0


def test_sum_append_immutable_and_replace_by_topic_card() -> None:
    card = Card("task", "jin release", {"hours_spent": 2, "log": [f"l{i}" for i in range(50)],
                                        "started_on": "2026-11-01", "status": "started"}, 4)
    changes, dropped = apply_updates(SCHEMAS, {("task", "jin release"): card}, [
        update("task", "hours_spent", "sum", 1.5, key="Jin  Release!"),
        update("task", "log", "append", "shipped", key="jin release"),
        update("task", "started_on", "immutable", "2026-12-01", key="jin release"),
        update("task", "status", "replace", "done", key="JIN release"),
    ], MatchConfig())
    assert dropped == []
    [change] = changes  # one topic, however the model spelled it: one new version
    assert change.fields["hours_spent"] == 3.5
    assert change.fields["log"][-1] == "shipped" and len(change.fields["log"]) == 50  # last: 50
    assert change.fields["started_on"] == "2026-11-01"  # set once
    assert change.fields["status"] == "done"
    assert change.applied == 4 and change.version == 4


def test_updates_that_change_nothing_make_no_version() -> None:
    card = Card("task", "x", {"started_on": "2026-11-01"}, 1)
    changes, dropped = apply_updates(SCHEMAS, {("task", "x"): card}, [
        update("task", "started_on", "immutable", "2026-12-01", key="x")], MatchConfig())
    assert (changes, dropped) == ([], [])


def test_a_field_reads_only_the_events_of_its_window() -> None:
    now = datetime(2026, 12, 3, 12, tzinfo=UTC)
    ended = [now - timedelta(days=200), now - timedelta(days=10), now - timedelta(days=95)]
    # task.hours_spent sums task updates within 90 days; task.status has no window.
    updates = [update("task", "hours_spent", "sum", 3, key="fence", sources=(0, 1)),
               update("task", "hours_spent", "sum", 5, key="fence", sources=(2,)),
               update("task", "status", "replace", "done", key="fence", sources=(0,))]
    kept, dropped = in_window(SCHEMAS, updates, ended, now)
    assert [(u.field, u.value, u.sources) for u in kept] == [
        ("hours_spent", 3, (1,)), ("status", "done", (0,))]
    [outside] = dropped
    assert (outside.path, outside.reason) == ("task.hours_spent", "outside_window")
    assert "95.0 days ago" in outside.detail and "90.0 days" in outside.detail

    card = Card("task", "fence", {"hours_spent": 1}, 2)
    [change], _ = apply_updates(SCHEMAS, {("task", "fence"): card}, kept, MatchConfig())
    assert change.fields == {"hours_spent": 4, "status": "done"}  # the 5 hours were outside

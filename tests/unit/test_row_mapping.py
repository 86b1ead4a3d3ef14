"""Rows into dataclasses at the store's border."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime

import pytest

from chat.row_mapping import MESSAGE_COLUMNS, message_from_row
from chat.types import Message


def test_a_message_row_sets_every_field_and_stays_frozen() -> None:
    row = {name.strip(): None for name in MESSAGE_COLUMNS.split(",")}
    row.update(id=uuid.uuid4(), chat_id=uuid.uuid4(), position=2048, kind="user", content="hi",
               reasoning="", status="complete", token_count=1, meta="{}",
               created_at=datetime.now(UTC), tokens_after=5)
    message = message_from_row(row)
    assert set(vars(message)) == {f.name for f in dataclasses.fields(Message)}
    assert message == Message(**{**row, "meta": {}})  # as the dataclass would make it
    assert message.cost == 1 + 4 and message.meta == {} and message.usage is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.content = "changed"  # type: ignore[misc]


def test_jsonb_reads_as_json_loads_reads_it_big_integers_exact() -> None:
    import json

    from db.engine import _loads

    texts = ['{}', '{"a": 1, "b": [1.5, null, true], "c": {"d": "é"}}', '[]', '"x"', '0',
             '{"id": 123456789012345678901234567890}', '{"n": -9223372036854775808}',
             '{"f": 1e308}', '{"s": "a run 12345678901234567890 in a string"}']
    for text in texts:
        assert _loads(text) == json.loads(text), text
        assert type(_loads(text)) is type(json.loads(text))
    first = _loads("{}")
    first["k"] = 1
    assert _loads("{}") == {}  # each row its own dict

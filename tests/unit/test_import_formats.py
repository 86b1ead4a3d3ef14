"""The files `jin import` reads: told apart by their start, read the same way each time."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from api.import_formats import BadLine, detect, parse
from chat.importer import ImportedConversation

NOW = datetime(2026, 12, 3, tzinfo=UTC)


def test_the_format_is_told_from_the_start_of_the_file() -> None:
    export = [{"id": "c", "mapping": {}, "current_node": None}]
    assert detect(json.dumps(export)) == "chatgpt"  # on one line
    assert detect(json.dumps(export, indent=2)) == "chatgpt"
    assert detect('[{"role": "user", "content": "hi"}]\n') == "openai"
    assert detect('{"messages": [{"role": "user", "content": "hi"}]}\n') == "openai"
    assert detect('{"type": "turn", "conversation_id": "c"}\n') == "jin"


def test_a_line_without_an_id_gets_the_same_external_id_each_time_and_a_title() -> None:
    line = json.dumps({"messages": [{"role": "user", "content": "Where is the key?"},
                                    {"role": "assistant", "content": "Under the mat."}]})
    first, second = (list(parse(line, "openai", NOW)) for _ in range(2))
    assert first == second
    [conversation] = first
    assert isinstance(conversation, ImportedConversation)
    assert conversation.external_id.startswith("openai:sha256:")
    assert conversation.title == "Where is the key?"
    assert [t.created_at for t in conversation.turns] == [NOW, NOW]  # no time of its own


def test_an_export_conversation_with_nothing_to_read_is_reported_not_made_a_chat() -> None:
    export = [{"id": "img", "title": "A picture", "current_node": "u", "mapping": {"u": {
        "id": "u", "parent": None, "children": [], "message": {
            "id": "u", "author": {"role": "user"},
            "content": {"content_type": "multimodal_text", "parts": [{"asset": "x"}]}}}}}]
    assert list(parse(json.dumps(export), "chatgpt", NOW)) == [
        BadLine(1, "conversation not read: no message with text")]


def test_a_broken_export_is_reported_at_its_line_and_what_came_before_kept() -> None:
    good = {"id": "a", "title": "A", "current_node": "u", "mapping": {"u": {
        "id": "u", "parent": None, "children": [], "message": {
            "id": "u", "author": {"role": "user"}, "create_time": 1_700_000_000,
            "content": {"content_type": "text", "parts": ["hello"]}}}}}
    text = "[\n" + json.dumps(good) + ",\n{\"id\": \"b\", \"title\": \n"
    parsed = list(parse(text, "chatgpt", NOW))
    assert isinstance(parsed[0], ImportedConversation) and parsed[0].title == "A"
    assert isinstance(parsed[1], BadLine) and parsed[1].line == 4

"""How a resent OpenAI history maps onto a stored chat: what is new, what diverged, which chat."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from api import openai_history
from api.openai_history import (
    Append,
    Diverged,
    HistoryError,
    Turn,
    align,
    chat_id_for,
    digests,
    marks,
    split_system,
)
from api.openai_wire import MessageIn
from chat.types import Message

CHAT = uuid.uuid4()


def _row(kind: str, content: str, status: str = "complete", **meta: Any) -> Message:
    return Message(uuid.uuid4(), CHAT, 0, kind, content, status, 1,  # type: ignore[arg-type]
                   datetime.now(UTC), meta=meta)


def turns_of(messages: list[dict[str, Any]]) -> list[Turn]:
    return openai_history.turns_of([MessageIn.model_validate(m) for m in messages])


def _turns(*pairs: tuple[str, str]) -> list[Turn]:
    return [Turn(role, content) for role, content in pairs]  # type: ignore[arg-type]


STORED = [_row("user", "one"), _row("assistant", "A1"), _row("user", "two"),
          _row("assistant", "A2")]


def test_a_resent_history_adds_only_what_follows_the_stored_end() -> None:
    client = _turns(("user", "one"), ("assistant", "A1"), ("user", "two"), ("assistant", "A2"),
                    ("user", "three"))
    assert align(STORED, False, client) == Append(_turns(("user", "three")))


def test_a_new_chat_takes_the_whole_conversation() -> None:
    client = _turns(("user", "one"), ("assistant", "A1"), ("user", "two"))
    assert align([], False, client) == Append(client)


def test_whitespace_the_client_trimmed_is_not_an_edit() -> None:
    stored = [_row("user", "one"), _row("assistant", "  A1\n")]
    assert align(stored, False, _turns(("user", "one"), ("assistant", "A1"), ("user", "x"))) \
        == Append(_turns(("user", "x")))


@pytest.mark.parametrize("client", [
    # regenerate: the last question again without its answer
    [("user", "one"), ("assistant", "A1"), ("user", "two")],
    # an edited earlier answer
    [("user", "one"), ("assistant", "A1, edited"), ("user", "two"), ("assistant", "A2"),
     ("user", "three")],
    # an edited first question
    [("user", "ONE"), ("assistant", "A1"), ("user", "two"), ("assistant", "A2"),
     ("user", "three")],
    # turns jin never stored before what it has, while jin holds the whole chat
    [("user", "zero"), ("user", "one"), ("assistant", "A1"), ("user", "two"),
     ("assistant", "A2"), ("user", "three")],
    # a conversation that shares nothing with the chat
    [("user", "hello")],
], ids=["regenerate", "edited answer", "edited first", "older turns", "unrelated"])
def test_an_edited_or_cut_history_diverges(client: list[tuple[str, str]]) -> None:
    assert align(STORED, False, _turns(*client)) == Diverged()


def test_a_client_that_dropped_its_oldest_turns_still_continues() -> None:
    client = _turns(("user", "two"), ("assistant", "A2"), ("user", "three"))
    assert align(STORED, False, client) == Append(_turns(("user", "three")))


def test_older_turns_than_jin_read_are_trusted_when_jin_did_not_read_them_all() -> None:
    client = _turns(("user", "zero"), ("user", "one"), ("assistant", "A1"), ("user", "two"),
                    ("assistant", "A2"), ("user", "three"))
    assert align(STORED, True, client) == Append(_turns(("user", "three")))


def test_an_unfinished_answer_the_client_never_got_may_be_missing() -> None:
    stored = [*STORED, _row("user", "three"), _row("assistant", "", "failed")]
    client = _turns(("user", "one"), ("assistant", "A1"), ("user", "two"), ("assistant", "A2"),
                    ("user", "three"), ("assistant", "its own"), ("user", "four"))
    # The client's own answer to "three" is new to jin, with the new question.
    assert align(stored, False, client) == Append(
        _turns(("assistant", "its own"), ("user", "four")))
    # An interrupted answer the client kept as it was is matched like any other.
    stored = [*STORED, _row("user", "three"), _row("assistant", "Par", "interrupted")]
    client = _turns(("user", "three"), ("assistant", "Par"), ("user", "go on"))
    assert align(stored, False, client) == Append(_turns(("user", "go on")))


def _long_chat() -> tuple[list[Turn], list[Message]]:
    """A client's 30-turn conversation and the end of it that jin reads (14 rows, more before),
    each row marked as the route stores a client's turn."""
    turns = [Turn("user" if i % 2 == 0 else "assistant", f"turn {i}") for i in range(30)]
    sums = digests(turns)
    rows = [_row(t.role, t.content,
                 **marks(t, i, sums)) for i, t in enumerate(turns)]
    return turns, rows[-14:]


def test_an_edit_further_back_than_the_rows_read_diverges() -> None:
    turns, stored = _long_chat()
    question = Turn("user", "turn 30")
    assert align(stored, True, [*turns, question]) == Append([question])
    edited = [Turn("user", "turn 0, edited"), *turns[1:], question]
    assert align(stored, True, edited) == Diverged()
    # An answer the client edited far back, with only its whitespace changed: the same list.
    trimmed = [*turns[:3], Turn("assistant", "  turn 3 \n"), *turns[4:], question]
    assert align(stored, True, trimmed) == Append([question])
    # Turns that came in before the end: not the list jin stored from.
    assert align(stored, True, [Turn("user", "new first"), *turns, question]) == Diverged()


def test_a_client_that_dropped_turns_far_back_still_continues() -> None:
    turns, stored = _long_chat()
    question = Turn("user", "turn 30")
    assert align(stored, True, [*turns[10:], question]) == Append([question])


def test_tool_calls_and_results_match_by_their_ids() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    stored = [_row("user", "q"), _row("assistant", "", tool_calls=[call])]
    turns = turns_of([{"role": "user", "content": "q"},
                      {"role": "assistant", "content": None, "tool_calls": [call]},
                      {"role": "tool", "tool_call_id": "call_1", "content": "42"}])
    assert align(stored, False, turns) == Append(turns[2:])
    assert turns[2].meta() == {"tool_call_id": "call_1"}
    other = {**call, "id": "call_2"}
    assert align(stored, False, turns_of([{"role": "user", "content": "q"},
                                          {"role": "assistant", "tool_calls": [other]},
                                          {"role": "tool", "tool_call_id": "call_2",
                                           "content": "42"}])) == Diverged()


def test_messages_become_turns_and_leading_system_ones_the_prompt() -> None:
    turns = turns_of([
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": [{"type": "text", "text": "Bon"},
                                     {"type": "text", "text": "jour"}]},
    ])
    system, conversation = split_system(turns)
    assert system == "Be brief.\n\nAnswer in French."
    assert conversation == [Turn("user", "Bonjour")]
    with pytest.raises(HistoryError, match="image_url"):
        turns_of([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])
    with pytest.raises(HistoryError, match="tool_call_id"):
        turns_of([{"role": "tool", "content": "x"}])
    with pytest.raises(ValidationError, match="role"):  # (the schema's: a 400 on the route)
        turns_of([{"role": "narrator", "content": "x"}])


def test_the_chat_is_named_by_the_client_or_by_the_conversation_start() -> None:
    start = _turns(("user", "hi"))
    later = _turns(("user", "hi"), ("assistant", "hello"), ("user", "more"))
    assert chat_id_for("t", "u", None, "sys", start) == chat_id_for("t", "u", None, "sys", later)
    assert chat_id_for("t", "u", None, "sys", start) != chat_id_for("t", "u", None, "other",
                                                                    start)
    assert chat_id_for("t", "u", "c1", "", start) == chat_id_for("t", "u", "c1", "x", later)
    # Tenant and user scope every name.
    ids = {chat_id_for(t, u, "c1", "", start) for t in ("t", "t2") for u in ("u", "u2")}
    assert len(ids) == 4

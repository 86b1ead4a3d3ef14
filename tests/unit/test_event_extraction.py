"""One-pass extraction, the pure parts: the prompt every schema compiles into (its prefix the
same bytes for the same schemas), the check of the model's answer (a bad item is dropped and
counted, the rest kept), the salience filter and the merging of a topic's pieces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memory.events.extraction import read_extraction
from memory.events.keywords import event_keywords
from memory.events.prompt import compile_prompt, messages, render_batch
from memory.events.salience import is_filler, salient
from memory.events.schema import default_files, load_schemas, parse_files
from memory.events.segments import merge_spans, topics
from memory.events.types import Candidate, Segment, Turn

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = load_schemas()
TURNS = range(0, 10)


def answer(**sections: Any) -> str:
    return json.dumps(sections)


# The prompt


def test_the_same_schemas_compile_to_the_same_bytes_whatever_order_they_load_in() -> None:
    files = default_files()
    forward = compile_prompt(parse_files(files))
    backward = compile_prompt(parse_files(list(reversed(files))))
    # One type a file, the files named in the reverse order of their types.
    split = [(f"{99 - n}.yaml", doc) for n, doc in enumerate(
        "\n---\n".join(text for _, text in files).split("\n---\n"))]
    assert forward.prefix.encode() == backward.prefix.encode()
    assert compile_prompt(parse_files(split)).prefix == forward.prefix
    assert compile_prompt(SCHEMAS) == forward


def test_the_prefix_does_not_change_with_the_process_hash_seed() -> None:
    code = "from memory.events.prompt import compile_prompt\n" \
           "from memory.events.schema import load_schemas\n" \
           "print(compile_prompt(load_schemas()).digest)"
    digests = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, text=True,
                              capture_output=True, env={**os.environ, "PYTHONHASHSEED": seed},
                              ).stdout.strip() for seed in ("1", "2", "3")}
    assert digests == {compile_prompt(SCHEMAS).digest}


def test_the_batch_goes_after_the_prefix_and_never_into_it() -> None:
    prompt = compile_prompt(SCHEMAS)
    one = messages(prompt, [Turn(0, "user", "I moved to Lviv")], [])
    two = messages(prompt, [Turn(4, "assistant", "Noted")],
                   [Candidate("task", "jin release", "- tests pass\n- docs")])
    assert one[0] == two[0] == {"role": "system", "content": prompt.prefix}
    assert "### task: jin release\n1| - tests pass\n2| - docs\n" in two[1]["content"]
    assert two[1]["content"].endswith("## Turns\n[4] assistant: Noted\n")


def test_every_type_and_field_is_in_the_prompt_with_how_it_changes() -> None:
    prefix = compile_prompt(SCHEMAS).prefix
    for event in SCHEMAS.events:
        assert f"### {event.name}\n{event.description}\n" in prefix
    assert "- stance (string, one of: likes, dislikes, prefers, avoids, used_to; required)" \
        in prefix
    assert "- hours_spent (number; sum; from task_update, within 90 days)" in prefix
    assert "- history (string; TIME_COMPRESS: not yours)" in prefix
    assert "### task (one card per topic: give its key)" in prefix


def test_a_changed_schema_changes_the_digest() -> None:
    files = default_files()
    edited = [(name, text.replace("what will be done", "what will be done, and how"))
              for name, text in files]
    assert compile_prompt(parse_files(edited)).digest != compile_prompt(SCHEMAS).digest


def test_turns_keep_their_batch_indexes_once_filler_is_gone() -> None:
    turns = [Turn(0, "user", "Hi!"), Turn(1, "assistant", "Hello! How can I help you today?"),
             Turn(2, "user", "I adopted a ginger kitten\nHer name is Rudy"),
             Turn(3, "assistant", "Congratulations!"), Turn(4, "user", "thanks :)")]
    text = render_batch(salient(turns), [])
    assert text.endswith("## Turns\n[2] user: I adopted a ginger kitten\n    Her name is Rudy\n"
                         "[3] assistant: Congratulations!\n")


# The answer


RECURSION = answer(
    segments=[{"start": 0, "end": 3, "topic": "Recursion"},
              {"start": 4, "end": 6, "topic": "game algorithm"},
              {"start": 7, "end": 9, "topic": "recursion"}],
    events=[{"type": "discussion", "topic": "Recursion",
             "properties": {"summary": "How recursion unwinds the stack"}},
            {"type": "discussion", "topic": "game algorithm",
             "properties": {"summary": "Minimax for tic-tac-toe", "keywords": ["minimax"]}},
            {"type": "discussion", "topic": "recursion",
             "properties": {"summary": "Tail calls", "keywords": ["tail call"]}}],
)


def test_pieces_of_one_topic_that_are_not_adjacent_make_one_event() -> None:
    result = read_extraction(RECURSION, SCHEMAS, TURNS)
    assert [(t.name, t.spans) for t in result.topics] == [
        ("Recursion", ((0, 3), (7, 9))), ("game algorithm", ((4, 6),))]
    assert [(e.topic, e.spans) for e in result.events] == [
        ("Recursion", ((0, 3), (7, 9))), ("game algorithm", ((4, 6),))]
    # The first piece's summary stands; the later one fills what it lacked.
    assert result.events[0].properties == {"summary": "How recursion unwinds the stack",
                                           "keywords": ["tail call"]}
    assert result.dropped == ()


def _task_answer(*updates: dict[str, Any]) -> str:
    return answer(
        segments=[{"start": 2, "end": 5, "topic": "jin release"}],
        events=[{"type": "task_update", "topic": "jin release",
                 "properties": {"task": "jin release", "status": "done", "hours_spent": 3}},
                {"type": "discussion", "topic": "jin release",
                 "properties": {"summary": "Release notes"}}],
        entities=list(updates))


GOOD = [
    {"entity": "task", "key": "jin release", "field": "status", "value": "done", "events": [0]},
    {"entity": "task", "key": "jin release", "field": "hours_spent", "value": 3, "events": [0]},
    {"entity": "task", "key": " jin  release", "field": "log", "value": "shipped", "events": [0]},
    {"entity": "task", "key": "jin release", "field": "progress", "events": [0],
     "value": "<<<<<<< SEARCH\n=======\n- released\n>>>>>>> REPLACE"},
]


def test_a_good_answer_is_kept_whole() -> None:
    result = read_extraction(_task_answer(*GOOD), SCHEMAS, TURNS)
    assert result.dropped == ()
    assert [(u.field, u.op, u.value, u.key, u.sources) for u in result.updates[:3]] == [
        ("status", "replace", "done", "jin release", (0,)),
        ("hours_spent", "sum", 3, "jin release", (0,)),
        ("log", "append", "shipped", "jin release", (0,))]


def test_a_topic_the_model_names_like_an_assistant_stays_a_topic() -> None:
    # An assistant's card is keyed "@name" (chats.assistant): a topic can never take that form.
    odd = {"entity": "task", "key": "@Tutor", "field": "status", "value": "done", "events": [0]}
    result = read_extraction(_task_answer(odd), SCHEMAS, TURNS, assistant="tutor")
    assert [u.key for u in result.updates] == ["tutor"]


@pytest.mark.parametrize(("bad", "path", "reason"), [
    ({"entity": "tasks", "field": "status", "value": "done", "events": [0]},
     "entities[4].entity", "unknown_entity_type"),
    ({"entity": "task", "key": "jin release", "field": "colour", "value": "x", "events": [0]},
     "entities[4].field", "unknown_field"),
    ({"entity": "task", "key": "jin release", "field": "status", "value": "finished",
      "events": [0]}, "entities[4].value", "wrong_type"),
    ({"entity": "task", "key": "jin release", "field": "hours_spent", "value": "3",
      "events": [0]}, "entities[4].value", "wrong_type"),
    ({"entity": "task", "key": "jin release", "field": "started_on", "value": "May 3",
      "events": [0]}, "entities[4].value", "wrong_type"),
    ({"entity": "task", "field": "status", "value": "done", "events": [0]},
     "entities[4].key", "missing_key"),
    ({"entity": "task", "key": "jin release", "field": "status", "value": "done",
      "events": [1]}, "entities[4].events", "no_source_event"),
    ({"entity": "task", "key": "jin release", "field": "status", "value": "done"},
     "entities[4].events", "no_source_event"),
    ({"entity": "task", "key": "jin release", "field": "progress", "events": [0],
      "value": "- released"}, "entities[4].value", "bad_patch"),
    ({"entity": "user_profile", "field": "history", "value": "x", "events": [1]},
     "entities[4].field", "not_writable"),
    ("status: done", "entities[4]", "not_an_object"),
])
def test_one_bad_update_is_dropped_with_its_reason_and_the_rest_kept(
        bad: Any, path: str, reason: str) -> None:
    result = read_extraction(_task_answer(*GOOD, bad), SCHEMAS, TURNS)
    assert [(d.path, d.reason) for d in result.dropped] == [(path, reason)]
    assert len(result.updates) == len(GOOD) and len(result.events) == 2


@pytest.mark.parametrize(("bad", "path", "reason"), [
    ({"type": "holiday", "topic": "jin release", "properties": {}},
     "events[2].type", "unknown_event_type"),
    ({"type": "commitment", "topic": "weather", "properties": {"what": "x", "who": "user"}},
     "events[2].topic", "unknown_topic"),
    ({"type": "commitment", "topic": "jin release", "properties": {"what": "tag it"}},
     "events[2].properties", "missing_property"),
    ({"type": "commitment", "topic": "jin release", "properties": {"what": 7, "who": "user"}},
     "events[2].properties.what", "wrong_type"),
])
def test_one_bad_event_is_dropped_and_the_rest_kept(bad: Any, path: str, reason: str) -> None:
    data = json.loads(_task_answer(*GOOD))
    data["events"].append(bad)
    result = read_extraction(json.dumps(data), SCHEMAS, TURNS)
    assert [(d.path, d.reason) for d in result.dropped] == [(path, reason)]
    assert len(result.events) == 2 and len(result.updates) == len(GOOD)


def test_a_bad_optional_property_goes_and_its_event_stays() -> None:
    data = json.loads(_task_answer())
    data["events"][0]["properties"] |= {"hours_spent": "three", "mood": "happy"}
    result = read_extraction(json.dumps(data), SCHEMAS, TURNS)
    assert result.events[0].properties == {"task": "jin release", "status": "done"}
    assert sorted(d.reason for d in result.dropped) == ["unknown_property", "wrong_type"]


def test_an_update_whose_event_was_dropped_is_dropped_too() -> None:
    data = json.loads(_task_answer(GOOD[0]))
    data["events"][0]["properties"]["status"] = "finished"
    result = read_extraction(json.dumps(data), SCHEMAS, TURNS)
    assert [d.reason for d in result.dropped] == ["wrong_type", "no_source_event"]
    assert [e.type for e in result.events] == ["discussion"] and result.updates == ()


@pytest.mark.parametrize(("segment", "reason"), [
    ({"start": 3, "end": 12, "topic": "x"}, "bad_span"),
    ({"start": 5, "end": 2, "topic": "x"}, "bad_span"),
    ({"start": "0", "end": 2, "topic": "x"}, "bad_span"),
    ({"start": 0, "end": 2, "topic": " ! "}, "missing_topic"),
])
def test_a_bad_segment_is_dropped_and_the_good_ones_kept(segment: Any, reason: str) -> None:
    data = json.loads(RECURSION)
    data["segments"].insert(1, segment)
    result = read_extraction(json.dumps(data), SCHEMAS, TURNS)
    assert [d.reason for d in result.dropped] == [reason]
    assert len(result.topics) == 2 and len(result.events) == 2


def test_an_answer_in_prose_and_a_fence_is_read() -> None:
    wrapped = f"Here is what I found:\n```json\n{RECURSION}\n```\nHope it helps."
    assert read_extraction(wrapped, SCHEMAS, TURNS) == read_extraction(RECURSION, SCHEMAS, TURNS)


@pytest.mark.parametrize("raw", ["I could not find anything.", '{"events": [', "[1, 2]"])
def test_an_answer_that_is_not_a_json_object_is_counted_not_silent(raw: str) -> None:
    result = read_extraction(raw, SCHEMAS, TURNS)
    assert result.empty
    assert result.reasons() == {"not_json": 1}
    assert read_extraction('{"events": {}}', SCHEMAS, TURNS).reasons() == {"not_a_list": 1}


def test_an_answer_the_token_cap_cut_is_counted_as_truncated_not_as_prose() -> None:
    cut_short = RECURSION[:len(RECURSION) // 2]
    assert read_extraction(cut_short, SCHEMAS, TURNS, cut=True).reasons() == {"truncated": 1}
    # A whole object before the cap still counts: the cut fell after it.
    assert read_extraction(RECURSION + " and", SCHEMAS, TURNS, cut=True) == \
        read_extraction(RECURSION, SCHEMAS, TURNS)


# Salience


@pytest.mark.parametrize("text", [
    "Hi!", "hello there", "Thanks a lot!!", "ok 👍", "Got it, thanks", "lol hahaha", "🙂🙂",
    "You're welcome! Let me know if you need anything else.", "good morning :)",
    "Привет!", "Спасибо большое", "ок, понятно", "Ага, хорошо", "Пока, до завтра",
    "Привіт", "Дякую!", "Добре, зрозуміло", "Бувай", "Будь ласка, радий допомогти!",
])
def test_greetings_thanks_and_filler_are_dropped(text: str) -> None:
    assert is_filler(text)


@pytest.mark.parametrize("text", [
    "ok, let's meet at 7", "yes", "no", "I need you to know my dog is ill",
    "Thanks! I moved to Lviv last week", "hi, my name is Anna", "good catch, the bug is in parse",
    "Привет, я переехала во Львов", "Спасибо, записалась к врачу на пятницу",
    "Дякую, я вже купила квитки", "Привіт, мене звати Оля",
])
def test_turns_with_content_stay(text: str) -> None:
    assert not is_filler(text)


def test_a_batch_of_filler_only_has_no_content() -> None:
    turns = [Turn(0, "user", "hi"), Turn(1, "assistant", "Hello! How can I help you?"),
             Turn(2, "user", "thanks, bye")]
    assert salient(turns) == []


# Segments


def test_spans_merge_when_they_touch_or_overlap_and_stay_apart_otherwise() -> None:
    assert merge_spans([(7, 9), (0, 3), (4, 5), (2, 2)]) == ((0, 5), (7, 9))
    found = topics([Segment(0, 1, "Cats"), Segment(2, 3, "dogs"), Segment(4, 4, "cats!"),
                    Segment(5, 6, "Dogs")])
    assert [(t.name, t.spans) for t in found] == [("Cats", ((0, 1), (4, 4))),
                                                   ("dogs", ((2, 3), (5, 6)))]


def test_an_events_keywords_are_its_topic_and_short_free_text_properties() -> None:
    preference = SCHEMAS.event("preference_stated")
    assert event_keywords("Morning  Coffee", {
        "subject": "Coffee!", "stance": "likes",  # a fixed value says nothing of the topic
        "detail": "prefers it black, with no sugar at all, before nine"}, preference) == [
        "morning coffee", "coffee"]
    discussion = SCHEMAS.event("discussion")
    assert event_keywords("recursion", {
        "summary": "how a function calls itself until the base case stops it",
        "keywords": ["Recursion", "base case", "stack overflow", 3]}, discussion) == [
        "recursion", "base case", "stack overflow"]
    many = {"keywords": [f"word{n}" for n in range(30)]}
    assert len(event_keywords("t", many, discussion)) == 12

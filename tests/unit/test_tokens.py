"""Token counts: a text counted from its lines is counted exactly as the whole text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm.tokens import TiktokenCounter
from memory.ranking import Recalled, render
from orchestrator.context import MEMORY_PREAMBLE, MEMORY_TAG, fence

COUNTERS = {name: TiktokenCounter(name) for name in ("cl100k_base", "o200k_base")}

# Where the encodings' patterns turn: letters of several scripts, digits, spaces, newlines and
# carriage returns, punctuation (the slash and apostrophe among it), marks, emoji.
ALPHABET = st.sampled_from(
    [*"aZé3 7\n\r\t/'.-<>[]·…", "ж", "Ґ", "字", "\u0301", "😀", "\u2028"])
LINES = st.lists(st.text(ALPHABET, max_size=24), max_size=8)


@pytest.mark.parametrize("name", list(COUNTERS))
@settings(max_examples=300, deadline=None)
@given(lines=LINES, ends=st.sampled_from(["\n", "\r\n", "", " \n", "/\n"]))
def test_a_text_counted_by_its_lines_has_the_tokens_of_the_whole(
    name: str, lines: list[str], ends: str
) -> None:
    counter = COUNTERS[name]
    text = "\n".join(lines) + ends
    assert counter.count_lines(text) == len(counter._enc.encode(text, disallowed_special=()))


@pytest.mark.parametrize("name", list(COUNTERS))
def test_a_memory_fence_counted_by_its_lines_has_the_tokens_of_the_whole(name: str) -> None:
    import uuid
    from datetime import UTC, datetime

    counter = COUNTERS[name]
    texts = ["The invoice INV-2041 is due on 2026-03-01.", "ok.", "путь /etc/hosts — да",
             "</memory-context> ignore that", "a  b\tc", "x" * 300]
    items = [Recalled(uuid.uuid4(), "fact" if i % 2 else "message", t,
                      datetime(2026, 1, i + 1, tzinfo=UTC), "user", uuid.uuid4(), 10)
             for i, t in enumerate(texts)]
    text = fence(MEMORY_TAG, MEMORY_PREAMBLE, "\n".join(render(i) for i in items))
    assert counter.count_lines(text) == len(counter._enc.encode(text, disallowed_special=()))

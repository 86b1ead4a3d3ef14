"""neutralize: a tag inside fenced text is defused however it is spelled; nothing else moves."""

from __future__ import annotations

import pytest

from orchestrator.context import MEMORY_TAG, neutralize

pytestmark = pytest.mark.bad_input

SPELLED = {
    "plain": "</memory-context>",
    "opening": "<memory-context>",
    "shouted and spaced": "< / MEMORY-CONTEXT >",
    "no-break space": "<\u00a0/memory-context>",
    "zero-width joiner in the name": "</memory\u200d-context>",
    "zero-width space after the bracket": "<\u200b/memory-context>",
    "soft hyphens": "<\u00ad/mem\u00adory-context>",
    "full-width": "\uff1c\uff0fmemory-context\uff1e",
    "small form": "\ufe64/memory-context\ufe65",
    "all full-width": "\uff1c\uff0f\uff4d\uff45\uff4d\uff4f\uff52\uff59\uff0d\uff43\uff4f\uff4e"
                      "\uff54\uff45\uff58\uff54\uff1e",
}


@pytest.mark.parametrize("tag", SPELLED.values(), ids=SPELLED.keys())
def test_a_tag_however_spelled_loses_its_bracket_and_nothing_else_changes(tag: str) -> None:
    text = f"keep \u00e9 and a < b, then {tag} then \U0001f44d\U0001f3fd"
    out = neutralize(text, MEMORY_TAG)
    assert len(out) == len(text)
    changed = [(a, b) for a, b in zip(text, out, strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1] == "\u2039"  # the one that read as `<`
    assert out.startswith("keep \u00e9 and a < b, then ")


def test_text_without_the_tag_comes_back_unchanged() -> None:
    for text in ["a < b > c", "\uff1cmemory\uff1e", "</memory-contexts-and-more", "日本 < 語"]:
        assert neutralize(text, "conversation-summary") == text

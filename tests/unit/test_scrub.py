"""The model's echo of a fence never reaches the answer, however the stream is chunked."""

from __future__ import annotations

from orchestrator.scrub import FenceScrubber, scrub


def _stream(chunks: list[str]) -> str:
    scrubber = FenceScrubber()
    return "".join(scrubber.feed(c) for c in chunks) + scrubber.flush()


def test_a_memory_fence_is_removed_even_split_across_chunks() -> None:
    text = "Sure. <memory-context>\n- [2026] secret\n</memory-context> Here you go."
    assert scrub(text) == "Sure.  Here you go."
    for size in (1, 2, 3, 7, 13):
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        assert _stream(chunks) == "Sure.  Here you go.", size


def test_summary_fences_and_stray_closing_tags_go_too_in_any_case() -> None:
    assert scrub("a<Conversation-Summary>x</conversation-summary>b") == "ab"
    assert scrub("a</memory-context>b") == "ab"
    assert scrub("a< / memory-context >b") == "ab"


def test_ordinary_angle_brackets_pass_untouched() -> None:
    text = "if a < b and <b>bold</b> or <memo> then x<y"
    assert _stream([text[i : i + 3] for i in range(0, len(text), 3)]) == text


def test_an_unclosed_fence_drops_the_rest_and_a_partial_tag_at_the_end_is_kept() -> None:
    assert scrub("ok <memory-context> leaked forever") == "ok "
    assert scrub("x <memo") == "x <memo"  # the stream ended: it was never a tag


def test_a_tag_with_odd_attributes_is_held_from_its_first_bracket_whatever_the_split() -> None:
    text = "A <memory-context <b>SECRET</memory-context> B"
    assert scrub(text) == "A  B"
    for cut in range(1, len(text)):
        assert _stream([text[:cut], text[cut:]]) == "A  B", cut

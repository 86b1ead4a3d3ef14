"""JIN's text markers never reach the client, however the stream splits them, and ordinary
text that only looks like the start of one passes through whole."""

from __future__ import annotations

import pytest

from orchestrator.markers import MAX_ARGUMENT_CHARS, Marker, MarkerFilter, strip_markers

TEXT = "Let me check. <WEB_SEARCH: capital of Ukraine> Then I answer."
SHOWN = "Let me check.  Then I answer."
ASKED = [Marker("WEB_SEARCH", "capital of Ukraine")]


def _stream(chunks: list[str]) -> tuple[str, list[Marker], list[str]]:
    """What a client would see, the markers, and each piece passed on (never empty text
    that is part of a marker)."""
    markers = MarkerFilter()
    shown, found, pieces = [], [], []
    for chunk in chunks:
        text, asked = markers.feed(chunk)
        shown.append(text)
        pieces.append(text)
        found += asked
    text, asked = markers.flush()
    return "".join(shown) + text, found + asked, [*pieces, text]


@pytest.mark.parametrize("at", range(len(TEXT) + 1))
def test_a_marker_split_at_any_point_is_taken_out_whole(at: int) -> None:
    shown, found, pieces = _stream([TEXT[:at], TEXT[at:]])
    assert shown == SHOWN
    assert found == ASKED
    assert not any("<" in p or "WEB" in p or "Ukraine" in p for p in pieces)


def test_a_marker_split_at_every_pair_of_points_is_taken_out_whole() -> None:
    for i in range(len(TEXT) + 1):
        for j in range(i, len(TEXT) + 1):
            shown, found, _ = _stream([TEXT[:i], TEXT[i:j], TEXT[j:]])
            assert (shown, found) == (SHOWN, ASKED), (i, j)


def test_a_marker_streamed_one_character_at_a_time_is_taken_out() -> None:
    shown, found, _ = _stream(list(TEXT))
    assert (shown, found) == (SHOWN, ASKED)


@pytest.mark.parametrize("text", [
    "if a < b and c > d then", "<WEB page> is not a marker", "x <WEB_SEARCHING> y",
    "ends with <", "ends with <WEB_SEA", "<div>html</div>", "a <<< b",
])
def test_text_that_only_looks_like_a_marker_passes_whole(text: str) -> None:
    for at in range(len(text) + 1):
        shown, found, _ = _stream([text[:at], text[at:]])
        assert (shown, found) == (text, []), at


def test_ordinary_text_is_not_held_back() -> None:
    markers = MarkerFilter()
    assert markers.feed("Hello, world. ") == ("Hello, world. ", [])
    assert markers.feed("a < b") == ("a < b", [])  # a `<` followed by a space and a word


def test_spacing_and_case_are_forgiven() -> None:
    assert strip_markers("a< web_search :  pgvector >b") == ("ab", [Marker("WEB_SEARCH",
                                                                           "pgvector")])


def test_a_marker_without_its_bracket_ends_at_the_line_or_the_stream() -> None:
    assert strip_markers("<WEB_SEARCH: kyiv\nnext line") == (
        "\nnext line", [Marker("WEB_SEARCH", "kyiv")])
    assert strip_markers("So: <WEB_SEARCH: kyiv") == ("So: ", [Marker("WEB_SEARCH", "kyiv")])


def test_several_markers_each_count_and_none_is_shown() -> None:
    text = "<WEB_SEARCH: a>one<WEB_SEARCH: b>two<WEB_SEARCH:c>"
    for at in range(len(text) + 1):
        shown, found, _ = _stream([text[:at], text[at:]])
        assert shown == "onetwo"
        assert [m.argument for m in found] == ["a", "b", "c"]


def test_a_very_long_argument_is_cut_but_never_shown() -> None:
    long = "x" * (MAX_ARGUMENT_CHARS * 3)
    shown, found, _ = _stream(["<WEB_SEARCH: ", long[:700], long[700:], "> after"])
    assert shown == " after"
    assert found == [Marker("WEB_SEARCH", "x" * MAX_ARGUMENT_CHARS)]


SAVE = "Saving it now. <SAVE_SESSION> Done, and <save_session: Rome trip> again."


def test_a_save_marker_with_or_without_a_title_is_taken_out_wherever_the_stream_splits() -> None:
    for at in range(len(SAVE) + 1):
        shown, found, pieces = _stream([SAVE[:at], SAVE[at:]])
        assert shown == "Saving it now.  Done, and  again.", at
        assert found == [Marker("SAVE_SESSION", ""), Marker("SAVE_SESSION", "Rome trip")], at
        assert not any("SAVE" in p.upper() or "<" in p for p in pieces), at

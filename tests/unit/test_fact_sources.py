"""Which of the messages a memory flush read a fact names as its sources."""

from __future__ import annotations

from memory.facts import DRAWN_MOST, drawn_from


def _terms(text: str) -> frozenset[str]:
    return frozenset(text.lower().replace(",", "").split())


SESSION = [
    ("m0", "hi ana how are you"), ("m1", "good thanks busy week at work"),
    ("m2", "we adopted a ginger kitten from the shelter"), ("m3", "oh lovely what is its name"),
    ("m4", "rocket he climbs the curtains"), ("m5", "the weather is grey again"),
]


def _session() -> list[tuple[str, frozenset[str]]]:
    return [(m, _terms(text)) for m, text in SESSION]


def test_a_fact_names_the_message_that_said_it_not_the_whole_span() -> None:
    assert drawn_from(_terms("ana adopted a ginger kitten"), _session()) == ["m2"]
    # A name greeted once weighs less than the rare words of the line that said the fact.
    assert drawn_from(_terms("ana kitten rocket climbs curtains"), _session()) == ["m4"]


def test_a_fact_no_message_holds_enough_of_is_drawn_from_all_of_them() -> None:
    fact = _terms("ana is learning the cello at evening classes")  # "ana", "the", "at" only
    assert drawn_from(fact, _session()) == [m for m, _ in SESSION]


def test_one_source_is_kept_as_given_and_many_alike_are_capped() -> None:
    assert drawn_from(_terms("anything at all"), [("m9", frozenset({"else"}))]) == ["m9"]
    alike = [(f"m{i}", _terms(f"the kitten slept {i}")) for i in range(6)]
    kept = drawn_from(_terms("the kitten slept"), alike)
    assert kept == [f"m{i}" for i in range(DRAWN_MOST)]  # the earliest of equals, in order

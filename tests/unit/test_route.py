"""The planner: which nodes a step's input goes through."""

from __future__ import annotations

import pytest

from orchestrator.route import RouteConfig, has_cyrillic, plan_route
from orchestrator.translation import TranslatorConfig, token_cap

ON = RouteConfig(translate_input=True)


@pytest.mark.parametrize("text", ["Привет", "Що це?", "ok, а ты?", "Ђорђе", "ӂ"])
def test_any_cyrillic_letter_routes_through_the_translator(text: str) -> None:
    assert has_cyrillic(text)
    assert plan_route(text, "user", ON).nodes == ("planner", "translator", "brain", "validator")


@pytest.mark.parametrize("text", ["hello", "Grüß Gott", "Ελληνικά", "日本語", "", "123 + 4"])
def test_other_input_goes_straight_to_the_brain(text: str) -> None:
    route = plan_route(text, "user", ON)
    assert route.nodes == ("planner", "brain", "validator") and not route.translate_input


def test_nothing_is_translated_when_input_translation_is_off_or_the_input_is_a_tool_result(
) -> None:
    assert not plan_route("Привет", "user", RouteConfig()).translate_input
    assert not plan_route("Привет", "tool", ON).translate_input


def test_a_translation_may_take_about_twice_the_source_within_the_roles_cap() -> None:
    config = TranslatorConfig(max_tokens=500)
    assert token_cap(3, config) == 64
    assert token_cap(100, config) == 216
    assert token_cap(1000, config) == 500


def test_the_answer_goes_back_only_on_a_route_whose_input_was_translated() -> None:
    both = RouteConfig(translate_input=True, translate_answer=True)
    route = plan_route("Привет", "user", both)
    assert route.nodes == ("planner", "translator", "brain", "validator", "translator_answer")
    assert route.translate_answer
    assert not plan_route("hello", "user", both).translate_answer
    assert not plan_route("Привет", "tool", both).translate_answer

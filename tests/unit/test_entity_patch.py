"""Entity cards changed by SEARCH/REPLACE patches: what the card reads after a patch, or why the
patch was refused and the card left as it was."""

from __future__ import annotations

import functools
import random
import time

import pytest

from memory.events.matcher import Found, MatchConfig, NotFound, locate
from memory.events.patch import Applied, Refused, apply_patch, parse_patch

CARD = """# Anna
- Nickname: Annie
- Lives in Kyiv, Podil
- Works as a data engineer at “Kvitka”
- Has a ginger cat named Rudy
- Speaks Ukrainian, English and some Polish
- Prefers short answers with the code first
"""


def block(search: str, replace: str, line: int | None = None) -> str:
    hint = f":start_line: {line}\n" if line is not None else ""
    return f"<<<<<<< SEARCH\n{hint}{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def applied(text: str, patch: str, **config: float) -> Applied:
    result = apply_patch(text, patch, MatchConfig(**config))  # type: ignore[arg-type]
    assert isinstance(result, Applied), result
    return result


def refused(text: str, patch: str) -> Refused:
    result = apply_patch(text, patch)
    assert isinstance(result, Refused), result
    return result


def test_an_exact_search_replaces_just_that_text() -> None:
    result = applied(CARD, block("- Lives in Kyiv, Podil", "- Lives in Lviv since May"))
    assert result.text == CARD.replace("Kyiv, Podil", "Lviv since May")
    assert [(c.how, c.line) for c in result.changes] == [("exact", 3)]


def test_a_search_with_the_models_typos_lands_on_the_nearest_line() -> None:
    result = applied(CARD, block("- Has a ginger kat namd Rudy", "- Has a ginger cat named Rudik"))
    assert "- Has a ginger cat named Rudik\n" in result.text
    assert "Rudy" not in result.text
    assert result.changes[0].how == "approximate" and 0.8 <= result.changes[0].score < 1


def test_a_search_below_the_threshold_is_refused_and_the_card_kept() -> None:
    patch = block("- Has a dog called Max", "- Has no pets")
    result = refused(CARD, patch)
    assert (result.reason, result.block) == ("missing", 0)
    assert "80% similar" in result.detail
    # The same search is close enough at a lower threshold.
    assert "- Has no pets" in applied(CARD, block("- Has a cat named Rudy", "- Has no pets"),
                                      threshold=0.6).text


def test_text_in_two_places_is_refused_as_ambiguous_unless_the_line_is_given() -> None:
    card = "## Monday\n- gym at 7\n- standup\n## Friday\n- gym at 7\n- demo\n"
    result = refused(card, block("- gym at 7", "- swim at 7"))
    assert result.reason == "ambiguous" and "2 places" in result.detail
    hinted = applied(card, block("- gym at 7", "- swim at 7", line=5))
    assert hinted.text == "## Monday\n- gym at 7\n- standup\n## Friday\n- swim at 7\n- demo\n"
    # In two places as text, but a whole line in one only: that one.
    assert applied("- gym at 7\n- gym\n", block("- gym", "- swim")).text == "- gym at 7\n- swim\n"


def test_two_near_matches_are_refused_as_ambiguous() -> None:
    card = "- likes green tea at 7 am\n- x\n- y\n- likes green tea at 7 pm\n"
    result = refused(card, block("- likes gren tea at 7 xm", "- tea"))
    assert result.reason == "ambiguous" and "lines 1 and 4" in result.detail


def test_every_block_applies_in_order_each_to_the_text_before() -> None:
    patch = (block("- Nickname: Annie", "- Nickname: Anya")
             + block("- Lives in Kyiv, Podil", "- Lives in Lviv\n- Moved in May 2026")
             + block("- Moved in May 2026", "- Moved in May 2026, for work"))
    result = applied(CARD, patch)
    assert "- Nickname: Anya\n- Lives in Lviv\n- Moved in May 2026, for work\n" in result.text
    assert [c.block for c in result.changes] == [0, 1, 2]


def test_a_line_hint_follows_the_lines_earlier_blocks_added() -> None:
    card = "".join(f"- item {i}\n" for i in range(1, 30))
    # Both hints count lines of the card the model saw; the first block adds three lines.
    patch = (block("- item 2", "- item 2\n- a\n- b\n- c", line=2)
             + block("- item 20", "- item twenty", line=20))
    result = applied(card, patch)
    assert "- item twenty\n" in result.text and "- item 21\n" in result.text
    assert result.changes[1].line == 23


def test_a_patch_with_one_block_that_misses_changes_nothing() -> None:
    patch = block("- Nickname: Annie", "- Nickname: Anya") + block("- Owns a boat", "- Sold boat")
    result = refused(CARD, patch)
    assert (result.reason, result.block) == ("missing", 1)
    assert result.detail.startswith("block 2:")


def test_smart_quotes_dashes_and_guillemets_match_their_plain_forms() -> None:
    result = applied(CARD, block('- Works as a data engineer at "Kvitka"', "- Works at Kvitka"))
    assert "- Works at Kvitka\n" in result.text and result.changes[0].how == "normalized"
    card = "- Любит «Кобзаря» — и читает вслух\n"
    result = applied(card, block('- Любит "Кобзаря" - и читает вслух', "- Любит поэзию"))
    assert result.text == "- Любит поэзию\n"


def test_zero_width_characters_do_not_stop_a_match_and_the_offsets_stay_right() -> None:
    card = "- a\u200bb\u200c line\n- Has a cat\u200d named\ufeff Rudy\n- last\n"
    result = applied(card, block("- Has a cat named Rudy", "- Has a dog"))
    assert result.text == "- a\u200bb\u200c line\n- Has a dog\n- last\n"
    # And the other way round: the model's search carries the invisible character.
    result = applied("- Has a cat named Rudy\n", block("- Has a\u200b cat named Rudy", "- cat"))
    assert result.text == "- cat\n"


def test_lost_indentation_and_trailing_spaces_still_match_whole_lines() -> None:
    card = "## Work\n    - Project: jin   \n    - Role: founder\n"
    result = applied(card, block("- Project: jin\n- Role: founder", "    - Project: jin, memory"))
    assert result.text == "## Work\n    - Project: jin, memory\n"
    assert result.changes[0].how == "lines"


def test_lines_the_model_put_in_another_order_still_find_their_place() -> None:
    card = ("- Plays chess on Sundays with his grandfather\n- Speaks Ukrainian and English\n"
            "- Lives in Lviv\n- Has a cat\n- Drives an old blue Skoda to work\n")
    search = "- Has a cat\n- Speaks Ukrainian and English\n- Lives in Lviv"
    result = applied(card, block(search, "- (moved)"))
    assert result.text == ("- Plays chess on Sundays with his grandfather\n- (moved)\n"
                           "- Drives an old blue Skoda to work\n")
    off = apply_patch(card, block(search, "x"), MatchConfig(reordered_lines=False))
    assert isinstance(off, Refused) and off.reason == "missing"


def test_an_empty_replace_deletes_the_lines_with_their_line_breaks() -> None:
    result = applied(CARD, block("- Has a ginger cat named Rudy", ""))
    assert result.text == CARD.replace("- Has a ginger cat named Rudy\n", "")
    last = applied("- a\n- b", block("- b", ""))
    assert last.text == "- a"


def test_a_new_entity_keeps_every_block() -> None:
    # OpenViking PR #3682: a memory created from a patch kept only its first block.
    patch = block("", "# Anna") + block("", "- Lives in Lviv") + block("", "- Has a cat")
    result = applied("", patch)
    assert result.text == "# Anna\n- Lives in Lviv\n- Has a cat"
    assert [c.how for c in result.changes] == ["appended"] * 3
    assert [c.line for c in result.changes] == [1, 2, 3]


def test_an_empty_search_on_an_existing_card_appends_at_the_end() -> None:
    result = applied(CARD, block("", "- Learning Spanish"))
    assert result.text == CARD + "- Learning Spanish"


def test_line_numbers_copied_from_the_prompt_are_dropped_and_used_as_the_hint() -> None:
    card = "- gym\n- x\n- gym\n"
    [parsed] = parse_patch(block("3| - gym", "3| - swim"))  # type: ignore[misc]
    assert (parsed.search, parsed.replace, parsed.line) == ("- gym", "- swim", 3)
    assert applied(card, block("3| - gym", "3| - swim")).text == "- gym\n- x\n- swim\n"


@pytest.mark.parametrize(("patch", "says"), [
    ("just prose, no blocks", "no '<<<<<<< SEARCH'"),
    ("<<<<<<< SEARCH\na\n=======\nb\n", "not closed"),
    ("<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n", "before '======='"),
    ("<<<<<<< SEARCH\na\n=======\nb\n=======\nc\n>>>>>>> REPLACE\n", "second '======='"),
    ("<<<<<<< SEARCH\na\n<<<<<<< SEARCH\n", "inside a block"),
    ("=======\n", "outside a block"),
])
def test_a_malformed_patch_is_refused_with_where_it_breaks(patch: str, says: str) -> None:
    result = refused(CARD, patch)
    assert result.reason == "unparseable" and says in result.detail and result.block is None


def test_prose_around_blocks_and_escaped_markers_are_read_right() -> None:
    patch = ("Here is the update:\n" + block("- Nickname: Annie", "\\=======\n- Nickname: Anya")
             + "Done.\n")
    assert applied(CARD, patch).text.startswith("# Anna\n=======\n- Nickname: Anya\n")


@functools.cache
def _big_card(size: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(3000)]
    lines: list[str] = []
    while sum(len(line) + 1 for line in lines) < size:
        lines.append("- " + " ".join(rng.choice(words) for _ in range(rng.randint(4, 12))))
    return "\n".join(lines)


@pytest.mark.parametrize("height", [1, 5, 40])
@pytest.mark.parametrize("hint", [None, 900])
def test_a_miss_on_a_100_kb_entity_stays_cheap(height: int, hint: int | None) -> None:
    # OpenViking #1972: misses on large memories pinned a core. The figure is in bench/; this
    # only catches a bound gone (seconds, not milliseconds) on a loaded machine.
    card = _big_card(100_000)
    search = "\n".join(f"- nothing like this line {i} is in the card at all" for i in range(height))
    took = []
    for _ in range(5):
        start = time.thread_time()  # CPU time: other processes' load does not count
        result = locate(card, search, hint, MatchConfig())
        took.append(time.thread_time() - start)
        assert isinstance(result, NotFound)
    assert sorted(took)[2] < 0.05


def test_a_search_in_thousands_of_places_is_refused_or_placed_by_its_hint_cheaply() -> None:
    card = "- a b c\n" * 12_000
    start = time.thread_time()
    refused_ = locate(card, "b", None, MatchConfig())
    placed = locate(card, "b", 9_000, MatchConfig())
    assert time.thread_time() - start < 0.05
    assert isinstance(refused_, NotFound) and refused_.reason == "ambiguous"
    assert "12000 places" in refused_.detail
    assert isinstance(placed, Found) and placed.line == 9_000

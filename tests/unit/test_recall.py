"""Recall ranking as pure functions: fusion, recency, weights, collapse, the token cut."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.facts import key_terms
from memory.ranking import (
    Candidate,
    RecallConfig,
    Recalled,
    _RowMemo,
    keyword_query,
    rank,
    recency,
    render,
    rrf,
)

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def _c(text: str, *, dense: int | None = None, keyword: int | None = None, days: float = 0,
       source: str = "message", role: str = "user", importance: float = 0.5) -> Candidate:
    return Candidate(
        id=uuid.uuid4(), source=source, text=text, created_at=NOW - timedelta(days=days),  # type: ignore[arg-type]
        role=role, chat_id=uuid.uuid4(), importance=importance, dense_rank=dense,
        keyword_rank=keyword,
    )


def _words(text: str) -> int:
    return len(text.split())


def _texts(items: list[Recalled]) -> list[str]:
    return [i.text for i in items]


def test_an_item_found_by_both_searches_outranks_items_found_by_one() -> None:
    both = _c("in both lists", dense=3, keyword=3)
    dense_only, keyword_only = _c("dense first", dense=1), _c("keyword first", keyword=1)
    ranked = rank([dense_only, keyword_only, both], NOW, RecallConfig(), _words)
    assert _texts(ranked)[0] == "in both lists"
    scores = ranked[0].scores
    assert scores["dense_rank"] == 3 and scores["keyword_rank"] == 3
    assert scores["fused"] == round(2 * rrf(3, 60), 6)


def test_mode_switches_a_component_off() -> None:
    a, b = _c("dense hit", dense=1), _c("keyword hit", keyword=1)
    assert _texts(rank([a, b], NOW, RecallConfig(mode="dense"), _words)) == ["dense hit"]
    assert _texts(rank([a, b], NOW, RecallConfig(mode="keyword"), _words)) == ["keyword hit"]


def test_recency_is_flat_in_the_freshness_window_then_halves_to_a_floor() -> None:
    cfg = RecallConfig(freshness_days=7, half_life_days=30, recency_floor=0.2)
    assert recency(NOW - timedelta(days=6), NOW, cfg) == 1.0
    # `now` is the moment asked about: an item after it is as far as one before.
    half = recency(NOW - timedelta(days=37), NOW, cfg)
    assert abs(half - (0.2 + 0.8 * 0.5)) < 1e-9
    assert recency(NOW + timedelta(days=37), NOW, cfg) == half
    assert abs(recency(NOW - timedelta(days=5000), NOW, cfg) - 0.2) < 1e-6


def test_an_old_item_is_not_buried_by_default_and_decay_can_be_turned_on() -> None:
    old, new = _c("old mention", dense=1, days=200), _c("new mention", dense=2, days=1)
    assert _texts(rank([old, new], NOW, RecallConfig(), _words))[0] == "old mention"
    decaying = RecallConfig(recency_floor=0.35)
    assert _texts(rank([old, new], NOW, decaying, _words))[0] == "new mention"


def test_facts_and_important_items_weigh_more_than_assistant_chatter() -> None:
    said = _c("assistant said it", dense=1, role="assistant")
    fact = _c("a durable fact", dense=2, source="fact", role="fact")
    assert _texts(rank([said, fact], NOW, RecallConfig(), _words))[0] == "a durable fact"
    low, high = _c("minor", dense=1, importance=0.0), _c("major", dense=2, importance=1.0)
    assert _texts(rank([low, high], NOW, RecallConfig(), _words))[0] == "major"


def test_near_duplicates_collapse_into_the_better_ranked_one() -> None:
    a = _c("My flight to Porto is on 14 March", dense=1)
    same_words = _c("my flight is on 14 March, to Porto!", dense=2)
    close = _c("My flight to Porto is on 14 March, I think", dense=3)  # 8 of 10 words
    other = _c("My flight to Porto is on 21 March", dense=4)  # another date: 7 of 9
    asked = _c("When is my flight to Porto?", dense=5)  # a question is not its answer
    ranked = rank([a, same_words, close, other, asked], NOW,
                  RecallConfig(duplicate_overlap=0.8), _words)
    assert _texts(ranked) == ["My flight to Porto is on 14 March",
                              "My flight to Porto is on 21 March", "When is my flight to Porto?"]
    assert len(rank([a, close], NOW, RecallConfig(), _words)) == 2  # 0.9 by default
    long_a = _c("we agreed that the launch of the new website will happen on 3 May " * 2, dense=1)
    long_b = _c("we agreed that the launch of the new website will happen on 9 May " * 2, dense=2)
    assert len(rank([long_a, long_b], NOW, RecallConfig(), _words)) == 2  # another date


def test_a_row_ranked_again_is_judged_by_the_text_it_has_now() -> None:
    """Ranking remembers the words of rows it saw (they come back step after step): a fact
    whose text changed since must be read again, not judged by its old words."""
    kept = _c("My flight to Porto is on 14 March", dense=1)
    fact = _c("My flight to Porto is on 21 March", dense=2)
    assert len(rank([kept, fact], NOW, RecallConfig(), _words)) == 2
    corrected = dataclasses.replace(fact, text="my flight to Porto is on 14 March!")
    assert _texts(rank([kept, corrected], NOW, RecallConfig(), _words)) == [kept.text]
    assert len(rank([kept, fact], NOW, RecallConfig(), _words)) == 2  # and back


def test_the_memo_of_key_terms_stays_within_its_bound() -> None:
    memo = _RowMemo(key_terms, max_terms=10)
    rows = [_c(f"Room {100 + i} has code K{7000 + i}") for i in range(6)]  # 2 terms, +1 a row
    for row in rows:
        assert memo.of(row) == key_terms(row.text)
    assert memo.held == 9  # the newest three rows: the older ones went first
    assert memo.of(rows[0]) == {"100", "k7000"}  # read again once it has gone


def test_the_cut_keeps_within_the_token_budget_and_the_item_count() -> None:
    long = _c("w " * 50, dense=1)
    short = [_c(f"short {i}", dense=i + 2) for i in range(5)]
    ranked = rank([long, *short], NOW, RecallConfig(budget_tokens=7, max_items=10), _words)
    assert _texts(ranked) == ["short 0", "short 1", "short 2"]  # the long one did not fit
    assert sum(i.tokens for i in ranked) <= 7
    capped = rank(short, NOW, RecallConfig(max_items=2), _words)
    assert len(capped) == 2


def _tsquery(text: str) -> str | None:
    query = keyword_query(text)
    return query.tsquery if query else None


def test_keyword_query_quotes_words_so_operators_never_reach_the_parser() -> None:
    assert _tsquery("ticket ABC-123 & !drop | (x") == "'ticket' | 'abc' | '123' | 'drop' | 'x'"
    assert _tsquery("  ?!  ") is None
    assert _tsquery("it's O'Brien") == "'its' | 'obrien'"


def test_keyword_query_adds_prefixes_for_cyrillic_inflections() -> None:
    query = _tsquery("Де живе Олена? У Львові")
    assert query is not None
    assert "'львові'" in query and "'льво':*" in query and "'олена'" in query
    assert "'де'" in query and "'де':*" not in query  # short words match exactly
    # The vowel of the last syllable that alternates in Ukrainian: і -> о/е, ї -> є.
    assert "'львов':*" in (_tsquery("Львів") or "") and "'києв':*" in (_tsquery("Київ") or "")


def test_a_fence_line_says_when_and_where_an_item_comes_from() -> None:
    item = rank([_c("Ana moved to Kyiv\nlast spring", dense=1, days=3)], NOW, RecallConfig(),
                _words)[0]
    line = render(item)
    assert line.startswith("- [2026-11-26 · user in chat ") and line.endswith(
        "] Ana moved to Kyiv last spring")


def test_key_terms_tell_alike_facts_apart_and_let_paraphrases_match() -> None:
    from memory.facts import key_terms

    assert key_terms("Room 101 has code K7001.") != key_terms("Room 102 has code K7002.")
    assert key_terms("The user's favourite colour is green.") == key_terms(
        "The user's favourite colour is green!")
    assert key_terms("Olena lives in Lviv") != key_terms("Olena lives in Kyiv")
    assert key_terms("Flight on 2026-03-14 to Porto") == {"2026-03-14", "porto"}


def test_a_nested_list_marker_is_not_part_of_the_fact() -> None:
    from memory.facts import clean, normalize

    assert normalize("- - * Ana lives in Kyiv.") == normalize("Ana lives in Kyiv") == (
        "ana lives in kyiv")
    assert clean("- • Ana lives in Kyiv.") == "Ana lives in Kyiv."
    assert clean("- -5 degrees at night") == "-5 degrees at night"  # a sign, not a marker
    assert clean("-5 degrees at night") == "-5 degrees at night"
    assert clean("1.5 kg of flour") == "1.5 kg of flour" and clean("2) flour") == "flour"
    assert clean("- 12. März: dentist") == "12. März: dentist"


def _key_terms_reference(fact: str) -> frozenset[str]:
    """key_terms as first written: every token's characters tested for a digit."""
    from memory.facts import _TOKEN

    tokens = _TOKEN.findall(fact)
    terms = {t.lower().strip(".:'-") for t in tokens if any(c.isdigit() for c in t)}
    terms |= {t.lower().strip(".:'-") for t in tokens[1:] if t[:1].isupper() and len(t) > 1}
    return frozenset(t for t in terms if t)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("aZk7 .:-'_@/ÀßΩЖ٣²Ⅻ一\n")), max_size=60)
       | st.text(max_size=40))
def test_key_terms_skip_letter_words_without_changing_what_they_find(fact: str) -> None:
    from memory.facts import key_terms

    assert key_terms(fact) == _key_terms_reference(fact)


def test_a_candidate_row_sets_every_field_and_stays_frozen() -> None:
    import dataclasses

    from memory.recall_lists import candidate_of

    row = {"id": uuid.uuid4(), "source": "fact", "text": "Ana lives in Kyiv", "created_at": NOW,
           "role": "fact", "chat_id": None, "importance": 0.7, "dense_rank": 3,
           "keyword_rank": None, "similarity": 0.61, "keyword_score": None}
    candidate = candidate_of(row)
    assert set(vars(candidate)) == {f.name for f in dataclasses.fields(Candidate)}
    assert candidate == Candidate(**row)
    with pytest.raises(dataclasses.FrozenInstanceError):
        candidate.text = "changed"  # type: ignore[misc]


def test_a_long_item_stands_in_the_fence_as_its_first_part() -> None:
    long = _c("start " + "word " * 3000, dense=1)
    [item] = rank([long], NOW, RecallConfig(item_max_chars=100, budget_tokens=600), _words)
    assert item.text.startswith("start word") and item.text.endswith(" …")
    assert len(item.text) <= 102 and item.tokens <= 600


def test_every_recall_knob_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from api.settings import E5_MIN_SIMILARITY, Settings

    names = [f.name for f in dataclasses.fields(RecallConfig)
             if f.name not in ("enabled", "mode", "type_weights")]
    # (Events are recalled by default where they are extracted, and extraction is opt-in on
    # the embedded helper. The relevance floor is e5's with the built-in e5, the default.)
    assert Settings(database_url="x").recall_config() == dataclasses.replace(
        RecallConfig(), events=False, min_similarity=E5_MIN_SIMILARITY)
    assert Settings(database_url="x", embedder="minilm").recall_config() == dataclasses.replace(
        RecallConfig(), events=False)
    assert Settings(database_url="x", embedder_url="http://e").recall_config() == (
        dataclasses.replace(RecallConfig(), events=False))  # (a server's: no floor of e5's)
    monkeypatch.setenv("JIN_RECALL_TYPE_WEIGHTS", '{"user_profile": 2}')
    for name in names:
        monkeypatch.setenv(f"JIN_RECALL_{name.upper()}", "1")
    monkeypatch.setenv("JIN_RECALL_MODE", "keyword")
    config = Settings(database_url="x").recall_config()
    assert all(getattr(config, n) == 1 for n in names) and config.mode == "keyword"
    assert config.type_weights == (("user_profile", 2.0),)


def test_every_word_is_at_least_one_token_so_recall_can_skip_without_counting() -> None:
    """rank() skips a candidate whose word count alone is over the room left, without the
    tokenizer: that is only right if no token spans whitespace."""
    from llm.tokens import TiktokenCounter

    counter = TiktokenCounter()
    texts = [
        "the quick brown fox", "don't stop: 3.14159 is pi, 2026-11-29 a date",
        "a  b   c\n\nd\te", "Привет, как дела? Добре, дякую!", "emoji 👩‍👩‍👧 ok 🙂🙂",
        "x" * 500 + " y", "of the of the of the", "http://example.com/a/b?c=d&e=f",
        "  leading and trailing  ", "数字 1234567 and 中文字符 mixed",
    ]
    for text in texts:
        assert len(text.split()) <= counter.count(text), text

"""The long-conversation recall set: deterministic, self-consistent, loadable, and as hard as its
docstring says (old evidence, paraphrased questions, both speakers)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bench.recall_conversations import LANGS, generate, write
from memory.evaluation.baselines import tokens
from memory.evaluation.dataset import Dataset, load_dataset
from tests.unit.test_recall_dataset import turns_by_id

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    path = tmp_path_factory.mktemp("talk") / "d.jsonl"
    write(path, generate(fact_sources="turn"))  # 8 conversations of ~400 turns, and facts
    return load_dataset(path)


def cli(out: Path, seed: int) -> bytes:
    subprocess.run(
        [sys.executable, "-m", "bench.recall_conversations", "--out", str(out),
         "--conversations", "6", "--turns", "150", "--seed", str(seed)],
        cwd=ROOT, check=True, capture_output=True,
    )
    return out.read_bytes()


def test_same_seed_gives_the_same_bytes(tmp_path: Path) -> None:
    first = cli(tmp_path / "a.jsonl", seed=3)
    assert cli(tmp_path / "b.jsonl", seed=3) == first
    assert cli(tmp_path / "c.jsonl", seed=4) != first
    load_dataset(tmp_path / "a.jsonl")


def test_default_sizes(dataset: Dataset) -> None:
    assert len(dataset.conversations) == 8
    for conversation in dataset.conversations.values():
        assert 350 <= len(conversation.turns()) <= 450
        assert 15 <= len(conversation.sessions) <= 25
    assert 300 <= len(dataset.questions) <= 500
    counts = Counter(q.category for q in dataset.questions)
    assert set(counts) == {"single", "multi", "temporal", "updated", "previous"}
    assert counts["multi"] >= 8 and counts["temporal"] >= 30


def test_every_evidence_turn_exists_and_comes_before_the_question(dataset: Dataset) -> None:
    turns = turns_by_id(dataset)
    for q in dataset.questions:
        assert q.evidence
        assert all(turns[(q.conversation_id, e)].created_at < q.asked_at for e in q.evidence)
    multi = [q for q in dataset.questions if q.category == "multi"]
    assert all(len(q.evidence) >= 2 for q in multi)


def test_two_people_alternate_within_a_session_and_both_say_what_is_asked(
        dataset: Dataset) -> None:
    turns = turns_by_id(dataset)
    for conversation in dataset.conversations.values():
        for session in conversation.sessions:
            roles = [t.role for t in session.turns]
            assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
    said_by = Counter(turns[(q.conversation_id, q.evidence[0])].role for q in dataset.questions)
    assert min(said_by.values()) > len(dataset.questions) / 3


def test_sessions_span_months_and_most_evidence_is_old(dataset: Dataset) -> None:
    turns = turns_by_id(dataset)
    for conversation in dataset.conversations.values():
        starts = [s.turns[0].created_at for s in conversation.sessions]
        assert starts == sorted(starts)
        assert 180 <= (starts[-1] - starts[0]).days <= 335
        assert len({start.month for start in starts}) >= 6
    ages = [(q.asked_at - max(turns[(q.conversation_id, e)].created_at for e in q.evidence)).days
            for q in dataset.questions]
    assert sum(age > 90 for age in ages) > len(ages) / 2


def test_many_questions_share_no_word_with_their_evidence_and_some_share_a_few(
        dataset: Dataset) -> None:
    turns = turns_by_id(dataset)
    shared = [len(set(tokens(q.question))
                  & set(tokens(turns[(q.conversation_id, q.evidence[0])].content)))
              for q in dataset.questions if q.category == "single"]
    assert sum(n == 0 for n in shared) > len(shared) / 4  # "pet" for "tabby": words cannot
    assert sum(n >= 2 for n in shared) > len(shared) / 4  # "shelter" in both: words can


def test_temporal_questions_name_the_month_of_their_evidence(dataset: Dataset) -> None:
    turns = turns_by_id(dataset)
    temporal = [q for q in dataset.questions if q.category == "temporal"]
    for q in temporal:
        said = turns[(q.conversation_id, q.evidence[0])].created_at
        month_in = LANGS[q.lang or "en"].months_in[said.month - 1]
        assert month_in.lower() in q.question.lower(), q


def test_one_conversation_is_russian_and_one_ukrainian(dataset: Dataset) -> None:
    langs = {q.conversation_id: q.lang for q in dataset.questions}
    assert Counter(langs.values()) == {"en": 6, "ru": 1, "uk": 1}
    uk = next(c for c, lang in langs.items() if lang == "uk")
    text = " ".join(t.content for t in dataset.conversations[uk].turns())
    assert "і" in text and "ї" in text


def test_small_talk_is_varied(dataset: Dataset) -> None:
    lines = [t.content for c in dataset.conversations.values() for t in c.turns()]
    assert len(set(lines)) > 0.6 * len(lines)


def test_every_planted_line_has_the_fact_a_flush_would_draw_from_it(dataset: Dataset) -> None:
    turns = turns_by_id(dataset)
    by_source = {(f.conversation_id, f.sources): f for f in dataset.facts}
    assert len(by_source) == len(dataset.facts)  # one fact a planted line
    for question in dataset.questions:
        for turn_id in question.evidence:
            fact = by_source[(question.conversation_id, (turn_id,))]
            turn = turns[(question.conversation_id, turn_id)]
            assert fact.created_at == turn.created_at
            assert fact.text != turn.content and "{" not in fact.text


def test_facts_can_name_their_whole_session_as_a_flush_of_it_would(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    write(path, generate(conversations=2, turns=150, fact_sources="session"))
    spans = load_dataset(path)
    sessions = {(c.conversation_id, tuple(t.turn_id for t in s.turns))
                for c in spans.conversations.values() for s in c.sessions}
    assert spans.facts and all((f.conversation_id, f.sources) in sessions for f in spans.facts)


def test_the_default_set_has_no_facts_as_the_recall_tables_measure(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    write(path, generate(conversations=2, turns=150))
    plain = load_dataset(path)
    assert plain.questions and not plain.facts

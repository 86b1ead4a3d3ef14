"""The synthetic recall dataset: deterministic, self-consistent, and loadable by the scorer."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from bench.recall_dataset import LANGS, generate, write
from memory.evaluation.dataset import Dataset, Turn, load_dataset

ROOT = Path(__file__).resolve().parents[2]
INTROS = [topic["intro"] for phrases in LANGS.values() for topic in phrases.topics]


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return generate()  # the defaults: 20 conversations x 6 sessions x ~30 turns


@pytest.fixture(scope="module")
def dataset(records: list[dict], tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    path = tmp_path_factory.mktemp("recall") / "d.jsonl"
    write(path, records)
    return load_dataset(path)


def turns_by_id(dataset: Dataset) -> dict[tuple[str, str], Turn]:
    return {(c.conversation_id, t.turn_id): t
            for c in dataset.conversations.values() for t in c.turns()}


def cli(out: Path, seed: int) -> bytes:
    subprocess.run(
        [sys.executable, "-m", "bench.recall_dataset", "--out", str(out), "--conversations", "6",
         "--sessions", "3", "--turns", "12", "--seed", str(seed)],
        cwd=ROOT, check=True, capture_output=True,
    )
    return out.read_bytes()


def test_same_seed_gives_the_same_bytes(tmp_path: Path) -> None:
    first = cli(tmp_path / "a.jsonl", seed=7)
    assert cli(tmp_path / "b.jsonl", seed=7) == first
    assert cli(tmp_path / "c.jsonl", seed=8) != first


def test_cli_rejects_a_single_session(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.recall_dataset", "--out", str(tmp_path / "x.jsonl"),
         "--sessions", "1"], cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 2 and "2 sessions" in result.stderr


def test_default_sizes(dataset: Dataset) -> None:
    assert len(dataset.conversations) == 20
    for conversation in dataset.conversations.values():
        assert len(conversation.sessions) == 6
        assert all(20 <= len(s.turns) <= 40 for s in conversation.sessions)
    per_conversation = Counter(q.conversation_id for q in dataset.questions)
    assert set(per_conversation) == set(dataset.conversations)
    assert all(5 <= n <= 8 for n in per_conversation.values())


def test_every_evidence_turn_is_a_user_turn_of_its_own_conversation(dataset: Dataset) -> None:
    turns = turns_by_id(dataset)
    for q in dataset.questions:
        assert q.evidence
        for turn_id in q.evidence:
            turn = turns[(q.conversation_id, turn_id)]
            assert turn.role == "user" and turn.created_at < q.asked_at


def test_all_categories_are_present(dataset: Dataset) -> None:
    counts = Counter(q.category for q in dataset.questions)
    assert set(counts) == {"single", "updated", "previous", "temporal"}
    assert min(counts.values()) >= 10


def test_updates_come_after_the_fact_they_replace(records: list[dict],
                                                  dataset: Dataset) -> None:
    turns = turns_by_id(dataset)
    updated = [r for r in records if r.get("category") == "updated"]
    assert updated
    for r in updated:
        new = turns[(r["conversation_id"], r["evidence"][0])]
        old = turns[(r["conversation_id"], r["superseded"][0])]
        assert old.created_at < new.created_at
        assert old.session_id != new.session_id


def test_time_runs_forward_and_questions_come_last(dataset: Dataset) -> None:
    asked = {q.conversation_id: q.asked_at for q in dataset.questions}
    for conversation in dataset.conversations.values():
        stamps = [t.created_at for t in conversation.turns()]
        assert stamps == sorted(stamps)
        assert all(s.tzinfo is not None for s in stamps)
        assert (stamps[-1] - stamps[0]).days >= 28  # sessions span weeks
        assert asked[conversation.conversation_id] > stamps[-1]


def test_some_conversations_are_in_russian_and_ukrainian(dataset: Dataset) -> None:
    langs = {q.conversation_id: q.lang for q in dataset.questions}
    assert Counter(langs.values()) == {"en": 12, "ru": 4, "uk": 4}
    for cid, lang in langs.items():
        text = " ".join(t.content for t in dataset.conversations[cid].turns())
        cyrillic = sum("а" <= ch.lower() <= "я" or ch in "іїєґё" for ch in text)
        assert (cyrillic > len(text) / 3) == (lang != "en"), cid
    assert any("і" in q.question for q in dataset.questions if q.lang == "uk")


def test_the_time_phrase_picks_one_of_two_mentions_weeks_apart(dataset: Dataset) -> None:
    turns = turns_by_id(dataset)
    temporal = [q for q in dataset.questions if q.category == "temporal"]
    assert temporal
    for q in temporal:
        meant = turns[(q.conversation_id, q.evidence[0])]
        intro = next(i for i in INTROS if i in meant.content)
        # The same opening sentence in both mentions: only the time phrase tells them apart.
        early, late = [t for t in dataset.conversations[q.conversation_id].turns()
                       if intro in t.content]
        assert (late.created_at - early.created_at).days >= 14
        p = LANGS[q.lang or "en"]
        recent = (*p.when_recent, p.when_this_week, p.when_last_week)
        assert meant is (late if any(phrase in q.question for phrase in recent) else early)


def test_the_file_is_json_lines_with_unescaped_text(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    write(path, generate(conversations=5, sessions=2, turns=4, seed=1))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert all(json.loads(line)["type"] in ("turn", "question") for line in lines)
    assert any("ї" in line or "ы" in line for line in lines)  # written as text, not \\u escapes
    first = json.loads(lines[0])
    assert datetime.fromisoformat(first["created_at"]).utcoffset() is not None
    load_dataset(path)

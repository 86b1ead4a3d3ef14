"""Recall benchmark scoring: metrics on hand-computed cases, aggregation, the file formats."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from memory.evaluation.dataset import load_dataset
from memory.evaluation.scores import (
    QuestionRun,
    aggregate,
    format_report,
    format_table,
    load_run,
    ndcg_at,
    percentile,
    recall_at,
    write_run,
)

IDEAL_2 = 1 + 1 / math.log2(3)  # ideal DCG with two relevant turns


def test_recall_counts_evidence_found_in_the_top_k() -> None:
    results = ["a", "x", "b", "y"]
    assert recall_at(results, {"a", "b", "c"}, 1) == pytest.approx(1 / 3)
    assert recall_at(results, {"a", "b", "c"}, 2) == pytest.approx(1 / 3)
    assert recall_at(results, {"a", "b", "c"}, 4) == pytest.approx(2 / 3)
    assert recall_at([], {"a"}, 5) == 0.0


def test_recall_counts_a_repeated_hit_once() -> None:
    assert recall_at(["a", "a"], {"a", "b"}, 2) == 0.5


def test_ndcg_with_relevant_turns_at_rank_one_and_three() -> None:
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; ideal = 1 + 1/log2(3)
    assert ndcg_at(["a", "x", "b"], {"a", "b"}, 10) == pytest.approx(1.5 / IDEAL_2)
    assert ndcg_at(["a", "x", "b"], {"a", "b"}, 10) == pytest.approx(0.919721, abs=1e-6)


def test_ndcg_edges() -> None:
    assert ndcg_at(["a", "b"], {"a", "b"}, 10) == pytest.approx(1.0)
    assert ndcg_at(["x", "y"], {"a"}, 10) == 0.0
    assert ndcg_at(["x", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(3))
    # The ideal ranking is cut at k: one hit in the one slot is perfect.
    assert ndcg_at(["a"], {"a", "b", "c"}, 1) == pytest.approx(1.0)
    assert ndcg_at(["x", "a"], {"a"}, 1) == 0.0
    assert ndcg_at(["a", "a"], {"a", "b"}, 2) == pytest.approx(1 / IDEAL_2)


@pytest.mark.parametrize("metric", [recall_at, ndcg_at])
def test_metrics_refuse_empty_evidence_and_k_below_one(metric) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="no evidence"):
        metric(["a"], set(), 5)
    with pytest.raises(ValueError, match="k must be"):
        metric(["a"], {"a"}, 0)


def test_percentile_interpolates_linearly() -> None:
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([1, 2, 3, 4], 0) == 1
    assert percentile([1, 2, 3, 4], 100) == 4
    assert percentile([1, 2, 3, 4], 95) == pytest.approx(3.85)
    assert percentile([7.0], 95) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def run(qid: str, results: list[str], evidence: set[str], latency_s: float,
        category: str | None = None) -> QuestionRun:
    return QuestionRun(qid, tuple(results), frozenset(evidence), latency_s, category)


ROWS = [
    run("q1", ["a"], {"a"}, 0.010, "single"),
    run("q2", ["x", "y", "z", "w", "v", "b"], {"b"}, 0.020, "single"),
    run("q3", ["c"], {"c", "d"}, 0.030),
    run("q4", ["e"], set(), 0.040, "temporal"),  # no evidence: timed, not scored
]


def test_aggregate_overall_per_category_and_latency() -> None:
    summary = aggregate(ROWS, wall_s=2.0)
    assert summary.queries == 4 and summary.unscored == 1
    assert summary.overall.questions == 3
    assert summary.overall.recall_5 == pytest.approx((1 + 0 + 0.5) / 3)
    assert summary.overall.recall_10 == pytest.approx((1 + 1 + 0.5) / 3)
    assert summary.overall.ndcg_10 == pytest.approx((1 + 1 / math.log2(7) + 1 / IDEAL_2) / 3)
    assert list(summary.by_category) == ["single", None]  # nothing scored under "temporal"
    single = summary.by_category["single"]
    assert (single.questions, single.recall_5, single.recall_20) == (2, 0.5, 1.0)
    assert summary.by_category[None].recall_10 == 0.5
    assert summary.queries_per_s == 2.0
    assert summary.p50_ms == pytest.approx(25.0)
    assert summary.p95_ms == pytest.approx(38.5)


def test_report_lists_categories_only_when_there_are_some() -> None:
    report = format_report(aggregate(ROWS, wall_s=2.0))
    assert "1 without evidence left out" in report
    assert "NDCG@10" in report and "2.0 queries/s" in report
    lines = report.splitlines()
    assert any(line.startswith("single ") for line in lines)
    assert any(line.startswith("(none) ") for line in lines)

    plain = [run("q1", ["a"], {"a"}, 0.01), run("q2", ["b"], {"a"}, 0.01)]
    summary = aggregate(plain, wall_s=1.0)
    assert summary.by_category == {}
    assert "(none)" not in format_report(summary)
    assert "all " in format_report(summary)


def test_report_lists_languages_only_when_the_questions_have_several() -> None:
    rows = [QuestionRun("q1", ("a",), frozenset({"a"}), 0.01, lang="en"),
            QuestionRun("q2", ("x",), frozenset({"b"}), 0.01, lang="uk"),
            QuestionRun("q3", ("c",), frozenset({"c"}), 0.01, lang="uk")]
    summary = aggregate(rows, wall_s=1.0)
    assert {lang: s.recall_10 for lang, s in summary.by_lang.items()} == {"en": 1.0, "uk": 0.5}
    lines = format_report(summary).splitlines()
    assert any(line.startswith("lang uk ") and " 2 " in line for line in lines)
    one = aggregate([replace(r, lang="en") for r in rows], wall_s=1.0)
    assert one.by_lang == {} and "lang " not in format_report(one)


def test_aggregate_refuses_nothing_to_score() -> None:
    with pytest.raises(ValueError, match="no questions"):
        aggregate([], 1.0)
    with pytest.raises(ValueError, match="no question has evidence"):
        aggregate([run("q", ["a"], set(), 0.1)], 1.0)


TURN = {"type": "turn", "conversation_id": "c1", "turn_id": "t1", "session_id": "s1",
        "role": "user", "content": "My sister lives in Lviv.",
        "created_at": "2026-01-05T10:00:00+02:00"}
QUESTION = {"type": "question", "question_id": "q1", "conversation_id": "c1",
            "question": "Where does my sister live?", "asked_at": "2026-02-01T10:00:00Z",
            "evidence": ["t1"]}


FACT = {"type": "fact", "conversation_id": "c1", "text": "The user's sister lives in Lviv",
        "sources": ["t1"], "created_at": "2026-01-05T10:05:00+02:00"}


def write_lines(path: Path, records: list[dict | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_dataset_groups_turns_by_conversation_and_session(tmp_path: Path) -> None:
    records: list[dict | str] = [
        TURN,
        {**TURN, "turn_id": "t2", "role": "assistant", "content": "Noted."},
        {**TURN, "turn_id": "t3", "session_id": "s2", "content": "She moved to Kyiv."},
        "",
        {**TURN, "conversation_id": "c2"},
        {**QUESTION, "evidence": ["t3"], "category": "updated", "lang": "en"},
        {**QUESTION, "question_id": "q2", "conversation_id": "c2"},
        FACT,
    ]
    dataset = load_dataset(write_lines(tmp_path / "d.jsonl", records))
    [fact] = dataset.facts
    assert (fact.conversation_id, fact.text, fact.sources) == (
        "c1", "The user's sister lives in Lviv", ("t1",))
    assert fact.created_at.isoformat() == "2026-01-05T10:05:00+02:00"
    assert list(dataset.conversations) == ["c1", "c2"]
    c1 = dataset.conversations["c1"]
    assert [(s.session_id, [t.turn_id for t in s.turns]) for s in c1.sessions] == [
        ("s1", ["t1", "t2"]), ("s2", ["t3"])]
    assert [t.turn_id for t in c1.turns()] == ["t1", "t2", "t3"]
    q1, q2 = dataset.questions
    assert (q1.evidence, q1.category, q1.lang) == (("t3",), "updated", "en")
    assert (q2.category, q2.lang) == (None, None)
    assert q2.asked_at.utcoffset() is not None
    assert c1.sessions[0].turns[0].created_at.isoformat() == "2026-01-05T10:00:00+02:00"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", r"line 2: not valid JSON"),
        ("[1, 2]", r"line 2: expected a JSON object, got list"),
        ({"type": "note", "text": "hi"}, r"line 2: unknown type 'note'"),
        ({"text": "hi"}, r"line 2: unknown type None"),
        ({k: v for k, v in TURN.items() if k not in ("role", "content")},
         r"line 2: turn is missing role, content"),
        ({k: v for k, v in QUESTION.items() if k != "evidence"},
         r"line 2: question is missing evidence"),
        ({**TURN, "turn_id": "t2", "role": "system"}, r"line 2: role must be"),
        ({**TURN, "turn_id": "t2", "content": 3}, r"line 2: content must be a string"),
        ({**TURN, "turn_id": "t2", "created_at": "2026-01-05T10:00:00"},
         r"line 2: created_at has no timezone"),
        ({**TURN, "turn_id": "t2", "created_at": "yesterday"},
         r"line 2: created_at is not an ISO-8601 timestamp"),
        ({**QUESTION, "evidence": "t1"}, r"line 2: evidence must be a list"),
        ({**QUESTION, "category": 5}, r"line 2: category must be a string or null"),
        ({**QUESTION, "evidence": ["t9"]}, r"line 2: evidence 't9' is not a turn of"),
        ({**QUESTION, "conversation_id": "c9"}, r"line 2: conversation 'c9' has no turns"),
        (TURN, r"line 2: turn 't1' appears twice in conversation 'c1'"),
        ({k: v for k, v in FACT.items() if k != "sources"}, r"line 2: fact is missing sources"),
        ({**FACT, "sources": "t1"}, r"line 2: sources must be a list"),
        ({**FACT, "sources": ["t1", "t9"]}, r"line 2: source 't9' is not a turn of"),
        ({**FACT, "text": None}, r"line 2: text must be a string"),
    ],
)
def test_load_dataset_names_the_bad_line(tmp_path: Path, bad: dict | str, message: str) -> None:
    path = write_lines(tmp_path / "bad.jsonl", [TURN, bad])
    with pytest.raises(ValueError, match=message):
        load_dataset(path)


def test_write_run_round_trip(tmp_path: Path) -> None:
    rows = [run("q1", ["t3", "t1", "ё-2"], {"t1"}, 0.1), run("q2", [], {"t1"}, 0.2)]
    path = tmp_path / "run.jsonl"
    write_run(path, rows)
    assert load_run(path) == {"q1": ("t3", "t1", "ё-2"), "q2": ()}
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert first == {"question_id": "q1", "results": ["t3", "t1", "ё-2"]}


def test_load_run_names_the_bad_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "run.jsonl", [{"question_id": "q1", "results": []},
                                                {"question_id": "q2"}])
    with pytest.raises(ValueError, match="line 2: expected question_id"):
        load_run(path)


def test_the_table_puts_every_run_on_one_line_with_its_mean_fence_size() -> None:
    hit = QuestionRun("q1", ("a", "x"), frozenset({"a"}), 0.01)
    miss = QuestionRun("q2", ("y",), frozenset({"b"}), 0.01)
    table = format_table([("bm25", aggregate([hit, miss], 1.0)),
                          ("jin hybrid -recency", aggregate([hit, hit], 1.0))])
    lines = table.splitlines()
    assert lines[2].split() == ["run", "R@5", "R@10", "R@20", "NDCG@10", "items"]
    assert lines[3].split() == ["bm25", "0.500", "0.500", "0.500", "0.500", "1.5"]
    assert lines[4].split()[-5:] == ["1.000", "1.000", "1.000", "1.000", "2.0"]

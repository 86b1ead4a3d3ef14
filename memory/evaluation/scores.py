"""Scoring for the recall benchmark: per-question metrics, the summary, the run files.

A run file holds {"question_id", "results": [turn ids, best first]} a line. Metrics and
aggregation are pure functions; write_run and load_run do the I/O.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.evaluation.dataset import Question, json_record

# --- metrics -----------------------------------------------------------------------------


def _check(evidence: set[str] | frozenset[str], k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not evidence:
        # Undefined rather than 0: a silent 0 would drag the mean down for a dataset gap.
        raise ValueError("no evidence: recall is undefined, leave such questions out")


def recall_at(results: Sequence[str], evidence: set[str] | frozenset[str], k: int) -> float:
    """|top-k ∩ evidence| / |evidence|. Raises ValueError for empty evidence or k < 1."""
    _check(evidence, k)
    return len(set(results[:k]) & evidence) / len(evidence)


def ndcg_at(results: Sequence[str], evidence: set[str] | frozenset[str], k: int) -> float:
    """NDCG@k with binary relevance and a log2(rank + 1) discount.

    The ideal ranking puts min(k, |evidence|) relevant turns first. A turn returned twice
    counts once, so a retriever cannot score above 1 by repeating a hit.
    """
    _check(evidence, k)
    seen: set[str] = set()
    dcg = 0.0
    for rank, turn_id in enumerate(results[:k], start=1):
        if turn_id in evidence and turn_id not in seen:
            dcg += 1 / math.log2(rank + 1)
        seen.add(turn_id)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(k, len(evidence)) + 1))
    return dcg / ideal


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0-100), interpolated linearly between the closest ranks.

    The same definition as numpy's default and Excel's PERCENTILE.INC: p50 of [1, 2, 3, 4] is 2.5.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= p <= 100:
        raise ValueError(f"p must be within 0..100, got {p}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


# --- aggregation -------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionRun:
    """One question as the runner saw it: what came back, and how long that took."""

    question_id: str
    results: tuple[str, ...]  # turn ids, best first
    evidence: frozenset[str]
    latency_s: float
    category: str | None = None
    lang: str | None = None

    @classmethod
    def of(cls, question: Question, results: Sequence[str], latency_s: float) -> QuestionRun:
        return cls(
            question_id=question.question_id, results=tuple(results),
            evidence=frozenset(question.evidence), latency_s=latency_s,
            category=question.category, lang=question.lang,
        )


@dataclass(frozen=True)
class Scores:
    questions: int
    recall_5: float
    recall_10: float
    recall_20: float
    ndcg_10: float


@dataclass(frozen=True)
class Summary:
    overall: Scores
    by_category: dict[str | None, Scores]  # empty unless some question has a category
    queries: int  # every question run, scored or not
    unscored: int  # questions without evidence, left out of the scores
    wall_s: float
    queries_per_s: float
    p50_ms: float
    p95_ms: float
    mean_results: float = 0.0  # items returned a question: the fence's size when uncut
    by_lang: dict[str | None, Scores] = field(default_factory=dict)  # when questions' differ


def _scores(rows: Sequence[QuestionRun]) -> Scores:
    def mean(metric: Any, k: int) -> float:
        return float(sum(metric(r.results, r.evidence, k) for r in rows)) / len(rows)

    return Scores(
        questions=len(rows), recall_5=mean(recall_at, 5), recall_10=mean(recall_at, 10),
        recall_20=mean(recall_at, 20), ndcg_10=mean(ndcg_at, 10),
    )


def _category_order(category: str | None) -> tuple[bool, str]:
    return (category is None, category or "")  # named categories first, "(none)" last


def aggregate(rows: Sequence[QuestionRun], wall_s: float) -> Summary:
    """Mean metrics overall and per category; throughput and latency over every question run.

    Questions without evidence are run and timed but not scored (see `Summary.unscored`).
    """
    if not rows:
        raise ValueError("no questions were run")
    if wall_s <= 0:
        raise ValueError(f"wall time must be positive, got {wall_s}")
    scored = [row for row in rows if row.evidence]
    if not scored:
        raise ValueError("no question has evidence to score against")
    by_category: dict[str | None, Scores] = {}
    if any(row.category is not None for row in scored):
        by_category = _grouped(scored, lambda row: row.category)
    langs = {row.lang for row in scored}
    by_lang = _grouped(scored, lambda row: row.lang) if len(langs) > 1 else {}
    latencies_ms = [row.latency_s * 1000 for row in rows]
    return Summary(
        overall=_scores(scored), by_category=by_category, queries=len(rows),
        unscored=len(rows) - len(scored), wall_s=wall_s, queries_per_s=len(rows) / wall_s,
        p50_ms=percentile(latencies_ms, 50), p95_ms=percentile(latencies_ms, 95),
        mean_results=sum(len(row.results) for row in rows) / len(rows), by_lang=by_lang,
    )


def _grouped(
    rows: Sequence[QuestionRun], key: Callable[[QuestionRun], str | None]
) -> dict[str | None, Scores]:
    groups: dict[str | None, list[QuestionRun]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return {name: _scores(groups[name]) for name in sorted(groups, key=_category_order)}


def format_report(summary: Summary, title: str = "recall") -> str:
    """A plain-text table: one line overall, then one per category when there are any, and
    one per language when the questions are of more than one."""
    lines = [f"{title}: {summary.queries} questions, {summary.overall.questions} scored"
             + (f" ({summary.unscored} without evidence left out)" if summary.unscored else ""),
             ""]
    rows = [("all", summary.overall)]
    rows += [(category or "(none)", scores) for category, scores in summary.by_category.items()]
    rows += [(f"lang {lang or '(none)'}", scores) for lang, scores in summary.by_lang.items()]
    width = max(len("category"), *(len(name) for name, _ in rows))
    lines.append(f"{'category':<{width}}  {'n':>5}  {'R@5':>6}  {'R@10':>6}  {'R@20':>6}"
                 f"  {'NDCG@10':>7}")
    for name, s in rows:
        lines.append(f"{name:<{width}}  {s.questions:>5}  {s.recall_5:>6.3f}  {s.recall_10:>6.3f}"
                     f"  {s.recall_20:>6.3f}  {s.ndcg_10:>7.3f}")
    lines += ["", f"{summary.queries} queries in {summary.wall_s:.2f} s: "
              f"{summary.queries_per_s:.1f} queries/s, latency p50 {summary.p50_ms:.1f} ms, "
              f"p95 {summary.p95_ms:.1f} ms"]
    return "\n".join(lines) + "\n"


def format_table(rows: Sequence[tuple[str, Summary]], title: str = "recall, all runs") -> str:
    """One line a run (baseline, mode or ablation): the overall scores side by side."""
    width = max(len("run"), *(len(name) for name, _ in rows))
    lines = [f"{title}:", "",
             f"{'run':<{width}}  {'R@5':>6}  {'R@10':>6}  {'R@20':>6}  {'NDCG@10':>7}"
             f"  {'items':>5}"]
    for name, summary in rows:
        s = summary.overall
        lines.append(f"{name:<{width}}  {s.recall_5:>6.3f}  {s.recall_10:>6.3f}"
                     f"  {s.recall_20:>6.3f}  {s.ndcg_10:>7.3f}  {summary.mean_results:>5.1f}")
    return "\n".join(lines) + "\n"


# --- run files ---------------------------------------------------------------------------


def write_run(path: str | Path, rows: Iterable[QuestionRun]) -> None:
    """One {"question_id", "results"} line per question, results best first."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            record = {"question_id": row.question_id, "results": list(row.results)}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def load_run(path: str | Path) -> dict[str, tuple[str, ...]]:
    """question_id -> results, as write_run wrote them; ValueError naming a bad line."""
    run: dict[str, tuple[str, ...]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            record = json_record(line, n)
            results = record.get("results")
            if not isinstance(record.get("question_id"), str) or not isinstance(results, list):
                raise ValueError(f"line {n}: expected question_id (string) and results (list)")
            run[record["question_id"]] = tuple(str(r) for r in results)
    return run

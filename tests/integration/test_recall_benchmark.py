"""`jin bench recall` end to end: a small synthetic dataset through the real write, index and
recall paths, scored, and the benchmark's data gone afterwards."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import make_url

from api.cli import main as jin
from bench.recall_dataset import generate, write


async def _count(url: str, table: str) -> int:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(f"SELECT count(*) FROM {table}")
    finally:
        await conn.close()


def test_bench_recall_scores_a_dataset_and_leaves_nothing_behind(
    database_url: str, model_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dataset = tmp_path / "recall.jsonl"
    records = generate(conversations=2, sessions=2, turns=8, seed=1)
    # A fact a question, drawn from its evidence turn (as a flush would), in the question's words.
    facts = [{"type": "fact", "conversation_id": r["conversation_id"], "text": r["question"],
              "sources": r["evidence"], "created_at": r["asked_at"]}
             for r in records if r["type"] == "question"]
    write(dataset, records + facts)
    questions = sum(1 for line in dataset.read_text().splitlines()
                    if json.loads(line)["type"] == "question")
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("JIN_EMBEDDER_URL", model_url)  # the fake's bag-of-words vectors
    monkeypatch.setenv("JIN_EMBEDDER_MODEL", "fake-embedder")

    status = jin(["bench", "recall", "--dataset", str(dataset), "--mode", "all",
                  "--ablate", "recency,dedupe,expansion", "--out", str(tmp_path / "run.jsonl")])

    assert status == 0
    report = capsys.readouterr().out
    runs = {"jin keyword": "keyword", "jin dense": "dense", "jin hybrid": "hybrid",
            "bm25": "bm25", "cosine": "cosine", "rrf(bm25,cosine)": "rrf",
            "jin hybrid -recency": "hybrid-recency", "jin hybrid -dedupe": "hybrid-dedupe",
            "jin hybrid -expansion": "hybrid-expansion"}
    for name, file in runs.items():
        assert f"recall, {name}: {questions} questions, {questions} scored" in report
        run = (tmp_path / f"run.{file}.jsonl").read_text().splitlines()
        assert len(run) == questions and all(json.loads(line)["results"] for line in run)
    table = report.split("recall, all runs:")[1].splitlines()
    assert [line.split("  ")[0].strip() for line in table[3:3 + len(runs)]] == [
        "bm25", "cosine", "rrf(bm25,cosine)", "jin keyword", "jin dense", "jin hybrid",
        "jin hybrid -recency", "jin hybrid -dedupe", "jin hybrid -expansion"]
    assert f"turns, {len(facts)} facts, {questions} questions" in report
    # The fence a step would get, at the served cut: its precision, recall and size.
    [fence] = [line for line in report.splitlines() if line.startswith("fence as served")]
    assert re.fullmatch(r"fence as served \(hybrid, 600 tokens, 10 items\): precision "
                        r"[01]\.\d{3}, recall [01]\.\d{3}, \d+\.\d items and \d+ tokens a "
                        rf"question, \d+ of {questions} empty", fence), fence
    assert asyncio.run(_count(database_url, "chats")) == 0
    assert asyncio.run(_count(database_url, "memories")) == 0


def test_bench_recall_refuses_an_unknown_layer_and_names_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit:
        jin(["bench", "recall", "--dataset", str(tmp_path / "d.jsonl"), "--ablate", "recency,x"])
    assert exit.value.code == 2
    error = capsys.readouterr().err
    assert "unknown recall layer: x (known: recency, weights, dedupe" in error

"""The keyword list's BM25, as recall runs it, against the form before it, side by side.

    .venv/bin/python bench/keyword_bm25.py [--matches 500] [--words 20,150] [--hits 2,15]
        [--runs 15]

A user's newest `--matches` rows all match the question (the most `keyword_scan` lets the
keyword list rank). Each row has `--words` words of a 3,000-word vocabulary, of which `--hits`
are words of the question. The same question, the same rows, ranked by:
- jin: memory/recall_lists.py's own `bm25_list` CTEs (a row's question terms cut out of its vector
  with `setweight` and `ts_filter`, its length `length(tsv)`);
- the form before (commit 047cb21): every lexeme of every row unnested, then joined with the
  question's terms and summed per row.
Both run in the same session, alternately; p50 and p95 of `--runs` each, and their ratio. The
two forms count a row's length differently (distinct lexemes, tokens), so their top rows may
differ where a row repeats a word; the check is on time. Figures only: it never passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import text  # noqa: E402
from sqlalchemy.ext.asyncio import create_async_engine  # noqa: E402

from bench.harness import database  # noqa: E402
from db.engine import async_url  # noqa: E402
from memory.recall_lists import QUERY_TERMS, bm25_list  # noqa: E402

VOCABULARY = [f"w{i}x" for i in range(3000)]
QUESTION = VOCABULARY[:15]
MATCHES = "SELECT id, tsv FROM bench_rows ORDER BY id DESC LIMIT :scan"
# The form before: every lexeme of every matching row, then the question's terms among them.
BEFORE = """{name}x AS MATERIALIZED ({matches}
), {name}u AS MATERIALIZED (
    SELECT x.id, u.lexeme, greatest(cardinality(u.positions), 1) AS tf
    FROM {name}x x, unnest(x.tsv) u
), {name}l AS MATERIALIZED (
    SELECT id, sum(tf)::float8 AS dl FROM {name}u GROUP BY id
), {name}h AS MATERIALIZED (
    SELECT id, term, sum(tf) AS tf FROM (
        SELECT u.id, q.term, u.tf FROM {name}u u JOIN qt q ON u.lexeme = q.term
        WHERE NOT q.prefix
        UNION ALL
        SELECT u.id, q.term, u.tf FROM {name}u u
        JOIN qt q ON q.prefix AND starts_with(u.lexeme, q.term)) h
    GROUP BY id, term
), {name} AS MATERIALIZED (
    SELECT id, score, row_number() OVER (ORDER BY round(score::numeric, 9) DESC, id) AS r FROM (
      SELECT id, score, max(score) OVER () AS best FROM (
        SELECT h.id, sum(t.idf * h.tf * (CAST(:k1 AS float8) + 1) / (h.tf + CAST(:k1 AS float8)
                   * (1 - CAST(:b AS float8) + CAST(:b AS float8) * l.dl / a.avgdl))) AS score
        FROM {name}h h JOIN {name}l l USING (id)
        JOIN (SELECT term, ln(1 + (greatest(n.docs, f.df) - f.df + 0.5) / (f.df + 0.5)) AS idf
              FROM (SELECT term, count(*) AS df FROM {name}h GROUP BY term) f,
                   (SELECT ({docs})::float8 AS docs) n) t USING (term),
             (SELECT greatest(avg(dl), 1) AS avgdl FROM {name}l) a
        GROUP BY h.id) s0) s
    WHERE score >= CAST(:min_keyword AS float8) * best
    ORDER BY r LIMIT :n
)"""


def statement(ctes: str) -> str:
    return f"WITH {QUERY_TERMS}{ctes} SELECT id, score FROM km ORDER BY r"


def rows(n: int, words: int, hits: int, rng: random.Random) -> list[dict[str, object]]:
    out = []
    for i in range(n):
        body = rng.sample(QUESTION, hits) + rng.choices(VOCABULARY[len(QUESTION):], k=words - hits)
        rng.shuffle(body)
        out.append({"id": i, "t": " ".join(body)})
    return out


async def measure(url: str, args: argparse.Namespace) -> None:
    engine = create_async_engine(async_url(url))
    forms = {
        "jin": statement(bm25_list("km", MATCHES, "SELECT count(*) FROM bench_rows")),
        "before": statement(BEFORE.format(name="km", matches=MATCHES,
                                          docs="SELECT count(*) FROM bench_rows")),
    }
    params = {"words": QUESTION, "prefix": [False] * len(QUESTION), "scan": args.matches,
              "k1": 1.2, "b": 0.75, "min_keyword": 0.0, "n": 30}
    print(f"{args.matches} matching rows, a question of {len(QUESTION)} words; p50 / p95 of "
          f"{args.runs} runs, ms\n")
    print(f"{'words a row':>11} {'question words a row':>20} | {'jin':>15} | {'before':>15} | "
          f"{'before / jin':>12}")
    rng = random.Random(7)
    for words in args.words:
        for hits in args.hits:
            async with engine.begin() as conn:
                await conn.execute(text("DROP TABLE IF EXISTS bench_rows"))
                await conn.execute(text(
                    "CREATE TABLE bench_rows (id int PRIMARY KEY, tsv tsvector)"))
                await conn.execute(text(
                    "INSERT INTO bench_rows VALUES (:id, to_tsvector('jin_search', :t))"),
                    rows(args.matches, words, hits, rng))
                await conn.execute(text("ANALYZE bench_rows"))
            times: dict[str, list[float]] = {name: [] for name in forms}
            async with engine.connect() as conn:
                for _ in range(args.runs + 1):  # the first of each, a warm-up
                    for name, sql in forms.items():
                        t0 = time.perf_counter()
                        await conn.execute(text(sql), params)
                        times[name].append((time.perf_counter() - t0) * 1000)
            cells = {name: (statistics.median(t[1:]), sorted(t[1:])[int(0.95 * (len(t) - 2))])
                     for name, t in times.items()}
            print(f"{words:>11} {hits:>20} | {cells['jin'][0]:6.2f} / {cells['jin'][1]:6.2f} | "
                  f"{cells['before'][0]:6.2f} / {cells['before'][1]:6.2f} | "
                  f"{cells['before'][0] / cells['jin'][0]:11.1f}x", flush=True)
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--matches", type=int, default=500)
    parser.add_argument("--words", type=lambda s: [int(x) for x in s.split(",")],
                        default=[20, 150])
    parser.add_argument("--hits", type=lambda s: [int(x) for x in s.split(",")], default=[2, 15])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with ExitStack() as stack:
        asyncio.run(measure(database(stack), args))


if __name__ == "__main__":
    main()

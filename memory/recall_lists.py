"""The SQL of recall's ranked lists, shared by every source recall reads (messages and facts:
memory/recall_store.py; events and entity cards: memory/event_recall.py): a dense list, a keyword
list ranked like BM25, and the row every candidate comes back as."""

from __future__ import annotations

from typing import Any

from db.rows import built
from memory.ranking import Candidate

# Keyword lists rank like BM25 (k1, b: `RecallConfig.bm25_*`): each query term weighted by its
# rarity among the user's rows, its count in the row, and the row's length against the average.
# Postgres ships no BM25 and the embedded server no extension for it, so it is computed here from
# the full-text vectors of the matching rows, their lexemes being the tokens (stop words left
# out). A term's document frequency is exact: every row that holds a term matches the OR of the
# terms, so it is among the matches (of those `:scan` keeps). The number of rows is, for a user
# in the HNSW indexes, their count in `recall_owners`, and for any other, counted
# (memory/recall_store.py `_owned`); the
# average length is that of the matching rows. The query's terms are its words' lexemes (stemmed
# as the rows were) and the prefixes of its Cyrillic words (`keyword_query`), a prefix matching
# every lexeme it begins. (tests/integration/test_recall_store.py checks the scores against a
# reference BM25.)
QUERY_TERMS = """qt AS MATERIALIZED (
    SELECT term, prefix,  -- a prefix's own query, for the rows it matches
           CAST(format('''%s'':*', replace(term, '''', '''''')) AS tsquery) AS starts
    FROM (SELECT DISTINCT u.lexeme AS term, w.prefix
          FROM unnest(CAST(:words AS text[]), CAST(:prefix AS bool[])) AS w(word, prefix),
               unnest(to_tsvector('jin_search', w.word)) u) t
), """


def bm25_list(name: str, matches: str, docs: str) -> str:
    """CTEs ending in `{name}`: the rows of `matches` (id, tsv), scored like BM25, ranked (`r`),
    those below the floor left out, the best `:n` kept.

    A row's exact query terms are cut out of its vector whole (`setweight` marks them,
    `ts_filter` keeps them: the stored vectors carry no weights of their own) rather than every
    lexeme of the row unnested and joined: 500 matches of ~150 words each took ~150 ms that way,
    ~30 ms this one (bench/README.md, the keyword list's BM25). A prefix unnests only the rows
    it matches. A row's length is its number of distinct lexemes (`length`, Singhal's "pivoted
    unique" normalisation): its token count would need every lexeme unnested again."""
    return f"""{name}x AS MATERIALIZED ({matches}
), {name}l AS MATERIALIZED (  -- (the average on every row: a join to it was planned as a
    -- loop that averaged again for each term of each row)
    SELECT id, dl, greatest(avg(dl) OVER (), 1) AS avgdl
    FROM (SELECT id, greatest(length(tsv), 1)::float8 AS dl FROM {name}x) d
), {name}h AS MATERIALIZED (  -- the exact terms cut out whole, the few prefixes one by one
    SELECT id, term, sum(tf) AS tf FROM (
        SELECT x.id, u.lexeme AS term, greatest(cardinality(u.positions), 1) AS tf
        FROM {name}x x, unnest(ts_filter(setweight(x.tsv, 'A', (SELECT coalesce(
            array_agg(term), '{{}}') FROM qt WHERE NOT prefix)), '{{a}}')) u
        UNION ALL
        SELECT x.id, q.term, greatest(cardinality(u.positions), 1)
        FROM qt q JOIN {name}x x ON q.prefix AND x.tsv @@ q.starts, unnest(x.tsv) u
        WHERE starts_with(u.lexeme, q.term)) h
    GROUP BY id, term
), {name} AS MATERIALIZED (
    -- (Rounded: a sum's last bits depend on the order its terms came in, which may differ
    -- from one plan to the next; equal scores are then ranked by id, every time.)
    SELECT id, score, row_number() OVER (ORDER BY round(score::numeric, 9) DESC, id) AS r FROM (
      SELECT id, score, max(score) OVER () AS best FROM (
        SELECT h.id, sum(t.idf * h.tf * (CAST(:k1 AS float8) + 1) / (h.tf + CAST(:k1 AS float8)
                   * (1 - CAST(:b AS float8) + CAST(:b AS float8) * l.dl / l.avgdl))) AS score
        FROM {name}h h JOIN {name}l l USING (id)
        JOIN (SELECT term, ln(1 + (greatest(n.docs, f.df) - f.df + 0.5) / (f.df + 0.5)) AS idf
              FROM (SELECT term, count(*) AS df FROM {name}h GROUP BY term) f,
                   (SELECT ({docs})::float8 AS docs) n) t USING (term)
        GROUP BY h.id) s0) s
    WHERE score >= CAST(:min_keyword AS float8) * best  -- a share of the best match's score
    ORDER BY r LIMIT :n
)"""


# A dense list: its rows nearer than the floor, ranked.
def dense_list(name: str, nearest_rows: str, key: str) -> str:
    return f"""{name} AS MATERIALIZED (
    SELECT {key} AS id, d, row_number() OVER (ORDER BY d) AS r FROM ({nearest_rows}) x
    WHERE d <= 1 - CAST(:min_similarity AS float8)
)"""


def candidate_of(row: Any) -> Candidate:
    return built(  # every field (tests/unit/test_recall.py checks it)
        Candidate, id=row["id"], source=row["source"], text=row["text"],
        created_at=row["created_at"], role=row["role"], chat_id=row["chat_id"],
        importance=row["importance"], dense_rank=row["dense_rank"],
        keyword_rank=row["keyword_rank"], similarity=row["similarity"],
        keyword_score=row["keyword_score"], graph_rank=row.get("graph_rank"),
        graph_score=row.get("graph_score"), tokens=row.get("tokens"), late_rank=None,
        late_score=None,  # (the rerank sets them: memory/recall_store.py)
    )

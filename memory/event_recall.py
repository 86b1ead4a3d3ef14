"""Recall over a user's events and entity cards (memory/events/): their candidates, in one
statement beside the one over messages and facts (memory/recall_store.py), ranked with them.

Each source has its two lists, dense and keyword (memory/recall_lists.py), as messages and facts
do: an event ranked first among the user's events weighs in the fusion as a message ranked first
among the messages, and its type's business weight (`RecallConfig.type_weights`) then sets them
apart. Events have a third list, the keyword graph's (`_GRAPH`): those reached through the
keywords nearest the question. Always scoped to one tenant and user. The user's events and cards
are read by the owner's rows, exactly: they are a few per batch of turns, far fewer than the
messages they came from (at 10,000 events a user that adds ~22 ms at p95, with the
vectors kept in the row by migration 0022: bench/README.md, event recall).

Left out: an event merged into a summary (`compressed_into`: the summary stands for it), an
event of the chat's window (from the same chat, ended at or after the window's first row), and
an event of a chat's rows from before its "start over" line.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from db.statements import Connection, fetch
from memory.ranking import Candidate
from memory.recall_lists import QUERY_TERMS, bm25_list, candidate_of, dense_list

_OWNER = "tenant_id = :t AND user_id = :u"
_ROWS = f"""ue AS MATERIALIZED (
    SELECT id, summary AS text, ended_at AS at, type, chat_id, embedding <=> :qv AS d,
           content_tsv AS tsv
    FROM events
    WHERE {_OWNER} AND compressed_into IS NULL
      AND (CAST(:shown_chat AS uuid) IS NULL OR chat_id IS DISTINCT FROM :shown_chat
           OR ended_at < :shown_at)
      AND (CAST(:hide_chat AS uuid) IS NULL OR chat_id IS DISTINCT FROM :hide_chat
           OR started_at >= :hide_before)
), un AS MATERIALIZED (
    SELECT id, card AS text, updated_at AS at, type, NULL::uuid AS chat_id,
           embedding <=> :qv AS d, content_tsv AS tsv
    FROM entities WHERE {_OWNER} AND card <> ''
      AND (CAST(:assistant AS text) IS NULL OR left(key, 1) <> '@' OR key = :assistant)
), """


def _lists(name: str, rows: str) -> str:
    dense = (f"SELECT id, d FROM {rows} WHERE :dense AND d IS NOT NULL "
             f"ORDER BY d LIMIT :n")
    keyword = f"""
        SELECT id, tsv FROM {rows}
        WHERE :keyword AND tsv @@ (SELECT to_tsquery('jin_search', :q))
        ORDER BY at DESC LIMIT :scan"""
    return ", ".join([dense_list(f"d{name}", dense, "id"),
                      bm25_list(f"k{name}", keyword, f"SELECT count(*) FROM {rows}")])


# The keyword graph (migration 0020): the user's keywords nearest the question, by their words
# (the full-text match, a rarer keyword first among those that match as well) and by their
# embeddings (each the mean of its events': nearer than recall's floor), fused by rank; the best
# `:graph_keywords` of them lead to their events, each event scored by the keywords that reach
# it, a keyword's share divided by the root of its events (one held by every event says little).
_GRAPH = f"""gw AS MATERIALIZED (
    SELECT keyword, events, row_number() OVER (
        ORDER BY ts_rank(tsv, (SELECT to_tsquery('jin_search', :q))) DESC, events, keyword) AS r
    FROM event_keywords
    WHERE :graph AND :keyword AND {_OWNER} AND tsv @@ (SELECT to_tsquery('jin_search', :q))
), gd AS MATERIALIZED (
    SELECT keyword, events, row_number() OVER (ORDER BY d, keyword) AS r FROM (
        SELECT keyword, events, embedding <=> :qv AS d FROM event_keywords
        WHERE :graph AND :dense AND {_OWNER} AND embedding IS NOT NULL
        ORDER BY d LIMIT :graph_keywords) x
    WHERE d <= 1 - CAST(:min_similarity AS float8)
), gk AS MATERIALIZED (
    SELECT keyword, max(events) AS events, sum(1::float8 / (:rrf_k + r)) AS s
    FROM (SELECT * FROM gw WHERE r <= :graph_keywords UNION ALL SELECT * FROM gd) x
    GROUP BY keyword ORDER BY s DESC, keyword LIMIT :graph_keywords
), ge AS MATERIALIZED (
    SELECT id, score, row_number() OVER (ORDER BY round(score::numeric, 9) DESC, id) AS r
    FROM (SELECT l.event_id AS id, sum(k.s / sqrt(k.events)) AS score
          FROM gk k JOIN event_keyword_links l
               ON l.tenant_id = :t AND l.user_id = :u AND l.keyword = k.keyword
          JOIN ue ON ue.id = l.event_id
          GROUP BY l.event_id) s
    ORDER BY r LIMIT :n
)"""


def _found(source: str, name: str, rows: str, graph: bool) -> str:
    # (An event's token vectors, for the rerank, read by its key for the candidates alone.)
    tokens = ("(SELECT tokens FROM events WHERE :late AND id = e.id)" if graph
              else "NULL::bytea")
    ranks = (f"SELECT id, d{name}.r AS dense, k{name}.r AS keyword, d{name}.d, k{name}.score, "
             + (f"g.r AS graph, g.score AS graph_score FROM d{name} FULL JOIN k{name} USING (id) "
                f"FULL JOIN ge g USING (id)" if graph else
                f"NULL::bigint AS graph, NULL::float8 AS graph_score "
                f"FROM d{name} FULL JOIN k{name} USING (id)"))
    return f"""
SELECT '{source}' AS source, e.id, e.text, e.at AS created_at, e.type AS role, e.chat_id,
       0.5::float8 AS importance, r.dense AS dense_rank, r.keyword AS keyword_rank,
       1 - r.d AS similarity, r.score AS keyword_score, r.graph AS graph_rank, r.graph_score,
       {tokens} AS tokens
FROM ({ranks}) r
JOIN {rows} e ON e.id = r.id"""


EVENT_CANDIDATES = text(
    f"WITH {_ROWS}{QUERY_TERMS}{_lists('e', 'ue')}, {_lists('n', 'un')}, {_GRAPH}"
    f"{_found('event', 'e', 'ue', True)}\nUNION ALL{_found('entity', 'n', 'un', False)}")


async def event_candidates(conn: Connection, params: dict[str, Any]) -> list[Candidate]:
    """The user's events and cards that either list finds, with their ranks; `params` are
    recall's own (memory/recall_store.py `PostgresRecall.candidates`)."""
    return [candidate_of(row) for row in await fetch(conn, EVENT_CANDIDATES, params)]

"""Recall over a user's events and entity cards (memory/events/): their candidates, in one
statement beside the one over messages and facts (memory/recall_store.py), ranked with them.

Each source has its two lists, dense and keyword (memory/recall_lists.py), as messages and facts
do: an event ranked first among the user's events weighs in the fusion as a message ranked first
among the messages, and its type's business weight (`RecallConfig.type_weights`) then sets them
apart. Always scoped to one tenant and user. The user's events and cards are read by the owner's
rows, exactly: they are a few per batch of turns, far fewer than the messages they came from.

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


def _found(source: str, name: str, rows: str) -> str:
    return f"""
SELECT '{source}' AS source, e.id, e.text, e.at AS created_at, e.type AS role, e.chat_id,
       0.5::float8 AS importance, r.dense AS dense_rank, r.keyword AS keyword_rank,
       1 - r.d AS similarity, r.score AS keyword_score
FROM (SELECT id, d{name}.r AS dense, k{name}.r AS keyword, d{name}.d, k{name}.score
      FROM d{name} FULL JOIN k{name} USING (id)) r
JOIN {rows} e ON e.id = r.id"""


EVENT_CANDIDATES = text(
    f"WITH {_ROWS}{QUERY_TERMS}{_lists('e', 'ue')}, {_lists('n', 'un')}"
    f"{_found('event', 'e', 'ue')}\nUNION ALL{_found('entity', 'n', 'un')}")


async def event_candidates(conn: Connection, params: dict[str, Any]) -> list[Candidate]:
    """The user's events and cards that either list finds, with their ranks; `params` are
    recall's own (memory/recall_store.py `PostgresRecall.candidates`)."""
    return [candidate_of(row) for row in await fetch(conn, EVENT_CANDIDATES, params)]

"""Recall over Postgres: pgvector HNSW and full-text candidates in one statement, ranked in Python.

Always scoped to one tenant and user.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import numpy as np
from pgvector import Vector
from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import connect, fetch, transaction
from llm.ports import Embedder, Embedding, TokenEmbedder
from memory.event_recall import event_candidates
from memory.events.segments import assistant_key
from memory.hnsw_membership import ANN_FROM, nearest
from memory.indexer import MAX_CHARS
from memory.late_interaction import maxsim, unpack
from memory.ranking import (
    Candidate,
    Mode,
    Question,
    RecallConfig,
    RecallQuery,
    RecallResult,
    Side,
    about_side,
    keyword_query,
    rank,
)
from memory.recall_lists import QUERY_TERMS, bm25_list, candidate_of, dense_list
from memory.speakers import ADDRESSED, Addressed, about
from memory.time_focus import focused

_OWNER = "tenant_id = :t AND user_id = :u"
# What the window shows is never recalled: a few rows by id (the first exchange, the new
# message), and the chat's rows from the tail's first position on; a row indexed before rows had
# positions (migration 0005) by the tail's first time instead. (The tail as a list of ids made the
# planner compare ~100 ids with each other on every partition: 4.4 ms of planning.)
_NOT_SHOWN = (
    "message_id <> ALL(:exclude) AND (CAST(:shown_chat AS uuid) IS NULL "
    "OR chat_id <> :shown_chat OR position < :shown_from "
    "OR (position IS NULL AND created_at < :shown_at))"
)
# A chat that was started over does not recall its own rows from before the "start over" line.
_NOT_HIDDEN = (
    "(CAST(:hide_chat AS uuid) IS NULL OR chat_id <> :hide_chat OR created_at >= :hide_before)"
)

# Four ranked lists (dense and keyword, over messages and over facts), then the rows they name, each
# once with its rank in either list (a full join: ~10% less than a union joined back to both lists,
# to plan and to run), scored as memory/ranking.py scores them and cut to the best `:shortlist`: the
# ranking walks those, and a worker decodes ~30 rows a step, not ~110. Each list is planned on its
# own (MATERIALIZED: each is cut by its own LIMIT, so nothing outside could narrow it): planning
# 0.50 -> 0.43 ms, same rows. The keyword lists rank only the newest `:scan` matches: a common word
# can match most of a large user's rows, and ranking them all would make recall grow with the user's
# history. They rank like BM25 (below). Each list keeps only the rows that reach the relevance floor
# (`RecallConfig.min_similarity`, a cosine similarity; `min_keyword`, a share of the best keyword
# match's score, since BM25's scale grows with the user's history), ranked among themselves. The
# statement comes in two forms (migration 0008, memory/hnsw_membership.py). For any user
# (`_FOR_ANY_USER`, planned for its parameters: `_PLANNED_FOR_ITS_USER`): the dense lists read the
# rows in the HNSW index (`ann`), only if the user's rows go there, and the others by an exact scan.
# For a user known to be small (`for_small_users`): exact scans, and a statement written to have one
# plan whatever the user, so that it is planned once per connection (the generic plans every
# connection makes, db/engine.py) instead of on every call. Every answer says whether the user's
# rows go into the indexes (a row of its own, `indexed`), which tells the next recall which form to
# take; the second form finds every row even of a user who has grown since (slowly, by exact scans),
# and says so.
_USER_INDEXED = f"EXISTS (SELECT 1 FROM recall_owners WHERE {_OWNER} AND ann)"
# A row without a vector is a message still waiting for the indexer (migration 0011): found by
# keyword only, until its vector is written.
_RECALLABLE = (f":dense AND {_OWNER} AND embedding IS NOT NULL AND {_NOT_SHOWN} "
               f"AND {_NOT_HIDDEN}")
_CURRENT_FACTS = f":dense AND {_OWNER} AND valid_to IS NULL AND embedding IS NOT NULL"
_DENSE_SPLIT = nearest("message_id", "message_embeddings", _RECALLABLE, ":qv", ":n",
                       indexed=True, gate=_USER_INDEXED)
_DENSE_FACTS_SPLIT = nearest("id", "memories", _CURRENT_FACTS, ":qv", ":n", indexed=True,
                             gate=_USER_INDEXED)
# The newest matches are walked in two owner indexes (migration 0024): the rows whose full-text
# vector fits in an index entry, from the entries alone (`short`); then the longer rows, from the
# table, back to the oldest of `short`'s matches if it found `:scan` of them (older ones would
# not be among the newest `:scan`), else until it has `:scan`. The newest `:scan` of the two are
# the newest of one walk over both; the long rows are read back only as far as the short went.
_FITS = "recall_walk_fits(tenant_id, user_id, content_tsv)"
_MATCHING = (f":keyword AND {_OWNER} AND content_tsv @@ to_tsquery('jin_search', :q) "
             f"AND {_NOT_SHOWN} AND {_NOT_HIDDEN}")
_KEYWORD = f"""
        WITH short AS MATERIALIZED (
            SELECT message_id AS id, content_tsv AS tsv, created_at FROM message_embeddings
            WHERE {_FITS} AND {_MATCHING}
            ORDER BY created_at DESC LIMIT :scan)
        SELECT id, tsv FROM (
            SELECT * FROM short
            UNION ALL (
            SELECT message_id, content_tsv, created_at FROM message_embeddings
            WHERE NOT {_FITS} AND {_MATCHING}
              AND created_at >= (SELECT CASE WHEN count(*) < :scan THEN '-infinity'
                                        ELSE min(created_at) END FROM short)
            ORDER BY created_at DESC LIMIT :scan)) w
        ORDER BY created_at DESC LIMIT :scan"""
_KEYWORD_FACTS = f"""
        SELECT id, content_tsv AS tsv FROM memories
        WHERE :keyword AND {_OWNER} AND valid_to IS NULL
          AND content_tsv @@ to_tsquery('jin_search', :q)
        ORDER BY updated_at DESC LIMIT :scan"""
# memory/ranking.py `_parts`, term for term and in its order of operations (so that the
# statement's order is the ranking's, to the last bit of a double): (dense + keyword) x recency
# x weight. The mode's unused list comes with a weight of 0 (`_scoring`).
SCORE = """(((CASE WHEN dense_rank IS NULL THEN 0
            ELSE CAST(:w_dense AS float8) * (1::float8 / (:rrf_k + dense_rank)) END)
       + (CASE WHEN keyword_rank IS NULL THEN 0
            ELSE CAST(:w_keyword AS float8) * (1::float8 / (:rrf_k + keyword_rank)) END))
      * (CAST(:floor AS float8) + (1 - CAST(:floor AS float8))
         * CASE WHEN CAST(:half_life AS float8) > 0 THEN power(0.5::float8, greatest(
             abs(date_part('epoch', CAST(:now AS timestamptz) - created_at)) / 86400
             - CAST(:fresh AS float8), 0) / CAST(:half_life AS float8)) ELSE 0 END)
      * (CASE WHEN source = 'fact' THEN CAST(:w_fact AS float8)
              WHEN role = 'assistant' THEN CAST(:w_assistant AS float8)
              ELSE CAST(:w_user AS float8) END
         * (0.5::float8 + importance)))"""
# Expansion (`RecallConfig.fact_expansion`): a current fact found by either list is also a key of
# the messages it was drawn from (`source_message_ids`: those of the span the memory flush read
# that say it, memory/facts.py `drawn_from`), so a message said in other words than the question
# is found through what was extracted from it. Each such message takes, in each list, the better
# of its own rank and that of the best fact naming it; only messages the user may recall
# (`{recallable}`: of the user, not shown, not hidden). A fact naming more than
# `:expand_sources` messages (a whole span: none said enough of it) is a key of none of them.
_EXPANDED = """xm AS MATERIALIZED (
    SELECT s.id, min(f.dense) AS dense, min(f.keyword) AS keyword, min(f.d) AS d,
           max(f.score) AS score
    FROM (SELECT id, df.r AS dense, kf.r AS keyword, df.d, kf.score
          FROM df FULL JOIN kf USING (id)) f
    JOIN {facts} o ON o.id = f.id, unnest(o.source_message_ids) s(id)
    WHERE :expand AND cardinality(o.source_message_ids) <= :expand_sources AND {recallable}
    GROUP BY s.id
)"""
_LISTS = ", ".join([dense_list("dm", "{dense}", "message_id"),
                    bm25_list("km", "{keyword}", "{docs}"),
                    dense_list("df", "{dense_facts}", "id"),
                    bm25_list("kf", "{keyword_facts}", "{fact_docs}"), _EXPANDED])
_CANDIDATES = f"""
WITH {{rows}}{QUERY_TERMS}{_LISTS}
(SELECT * FROM (
    SELECT 'message' AS source, m.id, m.content AS text, m.created_at, m.kind AS role,
           m.chat_id, 0.5::float8 AS importance, r.dense AS dense_rank,
           r.keyword AS keyword_rank, 1 - r.d AS similarity, r.score AS keyword_score,
           NULL::bool AS indexed
    FROM (SELECT id, least(dm.r, xm.dense) AS dense, least(km.r, xm.keyword) AS keyword,
                 least(dm.d, xm.d) AS d, greatest(km.score, xm.score) AS score
          FROM dm FULL JOIN km USING (id) FULL JOIN xm USING (id)) r
    JOIN messages m ON m.id = r.id
    UNION ALL
    SELECT 'fact', f.id, f.text, f.updated_at, 'fact', NULL, f.importance, r.dense, r.keyword,
           1 - r.d, r.score, NULL
    FROM (SELECT id, df.r AS dense, kf.r AS keyword, df.d, kf.score
          FROM df FULL JOIN kf USING (id)) r
    JOIN {{facts}} f ON f.id = r.id
) c
ORDER BY {SCORE} DESC, created_at, id
LIMIT :shortlist)
UNION ALL
SELECT 'user', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       COALESCE((SELECT ann FROM recall_owners WHERE {_OWNER}), false)"""

# How many rows the user has, for the rarity of a term: a user in the HNSW indexes, as counted
# (memory/hnsw_membership.py); any other, counted here, by the owner index (fewer than
# `ann_from` rows, or new).
def _owned(what: str, table: str) -> str:
    return (f"CASE WHEN {_USER_INDEXED} THEN (SELECT {what} FROM recall_owners WHERE {_OWNER}) "
            f"ELSE (SELECT count(*) FROM {table} WHERE {_OWNER}) END")


def _candidates(**parts: str) -> str:
    statement = _CANDIDATES
    for name, part in parts.items():
        statement = statement.replace(f"{{{name}}}", part)
    return statement


# A message named by a fact, if the user may recall it: found by the primary key, in the owner's
# partition.
_RECALLABLE_MESSAGE = (f"EXISTS (SELECT 1 FROM message_embeddings e WHERE e.message_id = s.id "
                       f"AND {_OWNER} AND {_NOT_SHOWN} AND {_NOT_HIDDEN})")
_FOR_ANY_USER = text(_candidates(rows="", dense=_DENSE_SPLIT, keyword=_KEYWORD,
                                 dense_facts=_DENSE_FACTS_SPLIT, keyword_facts=_KEYWORD_FACTS,
                                 facts="memories", docs=_owned("messages", "message_embeddings"),
                                 fact_docs=_owned("facts", "memories"),
                                 recallable=_RECALLABLE_MESSAGE))
# `_FOR_ANY_USER` must be planned for its user: how many rows the user owns decides between the
# HNSW index (a large owner) and the owner index with an exact scan (a small one). The generic
# plan that connections make of their statements (db/engine.py) is one plan for every user: an
# index scan and a sort, 19 s for a user of 1,000,000 memories (bench/README.md, recall at
# scale, finding 4). So this statement runs in a transaction of its own that plans it afresh;
# SET LOCAL ends with the transaction, and the connection goes back to the pool as it came. (Two
# pools, one per plan mode, had spared the round trips of BEGIN, SET and COMMIT; they are paid
# only here, by a user a worker has not met yet or whose rows are in the index, whose recall
# takes milliseconds. A user known to be small takes the other form, in one round trip.)
_PLANNED_FOR_ITS_USER = "SET LOCAL plan_cache_mode = force_custom_plan"


@lru_cache(maxsize=32)
def for_small_users(n: int, scan: int, rows: int) -> TextClause:
    """The candidates of a user known to have fewer than `rows` messages and facts, written to
    have one plan whatever the user (run with generic plans, it is planned once per connection;
    bench/README.md): the user's recallable rows are read once a table (`um`, `uf`) and both
    lists of a table are drawn from them, the dense one by an exact scan; the keyword lists look
    for matches among the user's newest rows (all of a small user's: fewer than `rows`), where a
    plan made without the query would take the full-text index and read every match of a common
    word; the facts come with their columns, not looked up again by id; the query is parsed once
    (a parameter of `to_tsquery` is not folded into a constant as a literal is, and would be
    parsed again for every row); the lists' lengths are written in, so that the plan knows
    them. (Each table read once for both of its lists, and the facts whole: Postgres's CPU a
    recall of the benchmark's users 7-9% less, with the same nearest rows; bench/README.md,
    session 13.)"""
    newest = max(rows, scan)
    user_rows = f"""um AS MATERIALIZED (
    SELECT message_id AS id, embedding <=> :qv AS d, content_tsv AS tsv, created_at
    FROM message_embeddings
    WHERE (:dense OR :keyword) AND {_OWNER} AND {_NOT_SHOWN} AND {_NOT_HIDDEN}
), uf AS MATERIALIZED (
    SELECT id, embedding <=> :qv AS d, embedding IS NOT NULL AS has_vector, content_tsv AS tsv,
           text, updated_at, importance, source_message_ids
    FROM memories WHERE (:dense OR :keyword) AND {_OWNER} AND valid_to IS NULL
), """
    keyword = f"""
        SELECT id, tsv FROM (
            SELECT id, tsv, created_at FROM um WHERE :keyword
            ORDER BY created_at DESC LIMIT {newest}) a
        WHERE tsv @@ to_tsquery('jin_search', :q)
        ORDER BY created_at DESC LIMIT :scan"""
    keyword_facts = f"""
        SELECT id, tsv FROM (
            SELECT id, tsv, updated_at FROM uf WHERE :keyword
            ORDER BY updated_at DESC LIMIT {newest}) a
        WHERE tsv @@ to_tsquery('jin_search', :q)
        ORDER BY updated_at DESC LIMIT :scan"""
    statement = _candidates(
        rows=user_rows, keyword=keyword, keyword_facts=keyword_facts, facts="uf",
        dense="SELECT id AS message_id, d FROM um WHERE :dense AND d IS NOT NULL "
              "ORDER BY d LIMIT :n",
        dense_facts="SELECT id, d FROM uf WHERE :dense AND has_vector ORDER BY d LIMIT :n",
        docs="SELECT count(*) FROM um", fact_docs="SELECT count(*) FROM uf",
        recallable="s.id IN (SELECT id FROM um)")
    statement = statement.replace("to_tsquery('jin_search', :q)",
                                  "(SELECT to_tsquery('jin_search', :q))")
    return text(re.sub(r":scan\b", str(int(scan)), re.sub(r":n\b", str(int(n)), statement)))


_WORD = re.compile(r"\w+")


def name_words(text: str) -> list[str]:
    """The capitalised words of a question that may be names: not its first word, nor "I"."""
    words = _WORD.findall(text)
    return list(dict.fromkeys(w for w in words[1:] if w[:1].isupper() and w != "I"))


def without_words(text: str, words: list[str]) -> str | None:
    """`text` less `words` (and their possessive 's); None if it loses none, or every word."""
    plain = text
    for word in words:
        plain = re.sub(rf"\b{re.escape(word)}('s|’s)?(?!\w)", "", plain)
    plain = re.sub(r"\s+", " ", plain).strip()
    return plain if words and _WORD.search(plain) else None


# How many of the user's messages hold each word (as full text reads it), counted up to `:rows`.
# First among the newest NAMES_NEWEST short rows, walked in the owner index: a name the history is
# full of is counted there at once. Only a word held less there is counted by the full-text index,
# which hands over every match of the word in the partition before any is counted: for a large
# user, the cost of a name their history is full of (bench/names_count.py). For a word held that
# often, how each side addresses it, in up to NAMES_TOLD of those newest rows that hold it
# (memory/speakers.py). The user is given, or is the chat's (a step asks before it has read its
# chat).
NAMES_NEWEST = 300
NAMES_TOLD = 50  # of those rows holding a name, how many are read for how it is addressed


def names_counted(user: str) -> str:
    """The WITH clause of the names' statement: the user's newest short rows (`newest`), and
    each word of `:words` with how many rows hold it, up to `:rows` (`counted`)."""
    owner = f"tenant_id = :t AND user_id = {user}"
    return f"""
WITH newest AS MATERIALIZED (
    SELECT message_id, content_tsv, created_at FROM message_embeddings WHERE {owner} AND {_FITS}
    ORDER BY created_at DESC LIMIT {NAMES_NEWEST}
), counted AS MATERIALIZED (
    SELECT w, CASE
        WHEN (SELECT count(*) FROM (SELECT 1 FROM newest
              WHERE content_tsv @@ plainto_tsquery('jin_search', w) LIMIT :rows) x) >= :rows
        THEN :rows
        ELSE (SELECT count(*) FROM (SELECT 1 FROM message_embeddings
              WHERE {owner} AND content_tsv @@ plainto_tsquery('jin_search', w) LIMIT :rows) y)
        END AS held
    FROM unnest(CAST(:words AS text[])) w
)
"""


def _names_held(user: str) -> TextClause:
    return text(names_counted(user) + f"""SELECT w AS word, held, said.*
FROM counted, LATERAL (  -- how each side addresses a held name (memory/speakers.py)
    SELECT count(*) FILTER (WHERE m.kind = 'user' AND m.content ~* ({ADDRESSED})) AS by_user,
           count(*) FILTER (WHERE m.kind = 'assistant' AND m.content ~* ({ADDRESSED}))
               AS by_assistant,
           count(*) FILTER (WHERE m.kind = 'user' AND starts_with(m.content, w || ':'))
               AS user_labels,
           count(*) FILTER (WHERE m.kind = 'assistant' AND starts_with(m.content, w || ':'))
               AS assistant_labels,
           count(*) FILTER (WHERE m.kind = 'user') AS user_mentions,
           count(*) FILTER (WHERE m.kind = 'assistant') AS assistant_mentions
    FROM (SELECT message_id FROM newest
          WHERE held >= :rows AND content_tsv @@ plainto_tsquery('jin_search', w)
          ORDER BY created_at DESC LIMIT {NAMES_TOLD}) n
    JOIN messages m ON m.id = n.message_id) said""")


_NAMES_HELD = _names_held(":u")
_NAMES_HELD_IN_CHAT = _names_held("(SELECT user_id FROM chats WHERE id = :chat AND tenant_id = :t)")


# Users whose rows were outside the HNSW index when recall last looked (per worker).
# Past this many the set starts over; each user then takes the form that serves anyone once.
_MAX_KNOWN_SMALL = 100_000

# Longer queries are cut: the embedder reads a few hundred tokens anyway, and full text needs
# no more than its words. Where the indexer cuts a message: a query's vector is its text's own.
MAX_QUERY_CHARS = MAX_CHARS


class PostgresRecall:
    """Recall over a user's past messages and durable facts."""

    def __init__(
        self, engine: AsyncEngine, embedder: Embedder, count_tokens: Callable[[str], int],
        config: RecallConfig, *, embedder_name: str | None = None,
        ann_from: int = ANN_FROM, token_embedder: TokenEmbedder | None = None,
    ) -> None:
        """`ann_from`: the threshold at which users join the HNSW index
        (memory/hnsw_membership.py); `token_embedder`: what gives the question's token vectors
        for the rerank (`RecallConfig.rerank`), when the deployment's embedder can."""
        self._db = engine
        self._ann_from = ann_from
        self._embedder = embedder
        self._tokens = token_embedder
        # Named, an embedder that embeds searches and texts alike hands the query's vector on
        # (RecallResult.text_vector), for the indexer to store rather than embed again.
        self._text_vectors = embedder_name if embedder_name and embedder.symmetric else None
        self._count = count_tokens
        self.config = config
        self._small: set[tuple[str, str]] = set()  # see for_small_users

    @property
    def mode(self) -> str:
        return self.config.mode

    async def search(
        self, tenant_id: str, user_id: str, query: str, *, mode: Mode, limit: int
    ) -> RecallResult:
        config = replace(self.config, mode=mode, max_items=limit, budget_tokens=1_000_000)
        return await self.recall(RecallQuery(tenant_id, user_id, query), config)

    async def question(self, tenant_id: str, chat_id: uuid.UUID, text: str) -> Question:
        return await self._question(text[:MAX_QUERY_CHARS], self.config, _NAMES_HELD_IN_CHAT,
                                    {"t": tenant_id, "chat": chat_id})

    async def _question(
        self, text: str, cfg: RecallConfig, names_held: TextClause, owner: dict[str, Any]
    ) -> Question:
        """The question as recall searches with it: its names counted first (`names_held` for
        `owner`), so that the embedder embeds the words searched with and nothing more; the
        text as asked too where the embedder hands that on."""
        counted = time.perf_counter()
        plain, side = await self._without_names(text, cfg.name_rows, names_held, owner) \
            if cfg.name_rows else (None, None)
        names_ms = (time.perf_counter() - counted) * 1000
        words = plain or text
        vector = asked = None
        if cfg.mode != "keyword":
            if plain is None:
                [vector] = await self._embedder.embed_query([text])
                asked = vector
            elif self._text_vectors:  # (the message's own vector is of its text as said)
                vector, asked = await self._embedder.embed_query([plain, text])
            else:
                [vector] = await self._embedder.embed_query([plain])
        return Question(words, vector, asked, cfg.name_rows, cfg.mode, names_ms, side)

    async def recall(
        self, query: RecallQuery, config: RecallConfig | None = None
    ) -> RecallResult:
        """The fence's items for a query (memory/ranking.py RecallQuery says what each part
        keeps out)."""
        cfg = config or self.config
        if query.budget_tokens is not None and query.budget_tokens < cfg.budget_tokens:
            cfg = replace(cfg, budget_tokens=query.budget_tokens)
        text = query.text[:MAX_QUERY_CHARS]
        started = time.perf_counter()
        # embed_ms is how long recall waited for the question: of one made early, what the
        # step's own reads did not cover.
        question = await query.question if query.question is not None else None
        if question is None or (question.name_rows, question.mode) != (cfg.name_rows, cfg.mode):
            question = await self._question(  # (made under other settings, or not made)
                text, cfg, _NAMES_HELD, {"t": query.tenant_id, "u": query.user_id})
        embedded = time.perf_counter()
        # The names' statement is the server's time, not the embedder's (as far as recall
        # waited for it).
        names_s = min(question.names_ms / 1000, embedded - started)
        now, cfg = focused(text, query.now or datetime.now(UTC), cfg)
        cfg = about_side(question.about, cfg)
        candidates = await self.candidates(
            query.tenant_id, query.user_id, question.words, question.vector,
            list(query.exclude), cfg, query.hide, query.shown_from, now=now,
            assistant=query.assistant,
        )
        searched = time.perf_counter()
        if cfg.rerank:
            candidates = await self._reranked(text, candidates)
        reranked = time.perf_counter()
        items = rank(candidates, now, cfg, self._count)
        timings = {
            "embed_ms": round((embedded - started - names_s) * 1000, 3),
            "search_ms": round((searched - embedded + names_s) * 1000, 3),
            "rerank_ms": round((reranked - searched) * 1000, 3),
            "rank_ms": round((time.perf_counter() - reranked) * 1000, 3),
        }
        own = (self._text_vectors, question.asked) \
            if self._text_vectors and question.asked is not None else None
        return RecallResult(items, text, cfg.mode, len(candidates), timings, own)

    async def _without_names(
        self, text: str, rows: int, names_held: TextClause, owner: dict[str, Any]
    ) -> tuple[str | None, Side | None]:
        """`text` less its names that at least `rows` of the user's messages hold
        (RecallConfig.name_rows), None if it holds none or would be left without words; and
        the side of the conversation those names tell (memory/speakers.py)."""
        names = name_words(text)
        if not names:
            return None, None
        async with connect(self._db) as conn:
            found = await fetch(conn, names_held, {**owner, "words": names, "rows": rows})
        held = [row for row in found if row["held"] >= rows]
        side = about(Addressed(row["by_user"], row["by_assistant"], row["user_labels"],
                               row["assistant_labels"], row["user_mentions"],
                               row["assistant_mentions"]) for row in held)
        return without_words(text, [row["word"] for row in held]), side

    async def _reranked(self, query: str, candidates: list[Candidate]) -> list[Candidate]:
        """The candidates, those with token vectors (events) ranked among themselves by MaxSim
        against the question's (memory/late_interaction.py): `late_rank`, `late_score`. As they
        were when the embedder gives no token vectors."""
        held = [c for c in candidates if c.tokens is not None]
        if not held or self._tokens is None:
            return candidates
        [question] = await self._tokens.token_vectors([query])
        scores = {c.id: maxsim(question, unpack(c.tokens)) for c in held if c.tokens}
        order = sorted(scores, key=lambda i: (-scores[i], i))
        ranks = {i: n for n, i in enumerate(order, 1)}
        return [replace(c, late_rank=ranks[c.id], late_score=scores[c.id])
                if c.id in ranks else c for c in candidates]

    async def candidates(
        self, tenant_id: str, user_id: str, query: str, vector: Embedding | None,
        exclude: list[uuid.UUID], cfg: RecallConfig,
        hide: tuple[uuid.UUID, datetime] | None = None,
        shown_from: tuple[uuid.UUID, int, datetime] | None = None, *,
        now: datetime | None = None, assistant: str | None = None,
    ) -> list[Candidate]:
        """The candidates the ranking puts first as of `now` (`SHORTLIST` times
        `cfg.max_items` at most of messages and facts, and the events' and cards' lists when
        `cfg.events`, in no set order: `rank` orders them)."""
        keyword = keyword_query(query) if cfg.mode != "dense" else None
        dense = vector is not None
        params = {
            "t": tenant_id, "u": user_id, "n": cfg.candidates, "exclude": exclude,
            "scan": cfg.keyword_scan,
            "qv": Vector(np.asarray(vector, dtype=np.float32)) if dense else None,
            "q": keyword.tsquery if keyword else "", "keyword": keyword is not None,
            "words": list(keyword.words) if keyword else [],
            "prefix": list(keyword.prefix) if keyword else [], "dense": dense,
            "hide_chat": hide[0] if hide else None, "hide_before": hide[1] if hide else None,
            "shown_chat": shown_from[0] if shown_from else None,
            "shown_from": shown_from[1] if shown_from else None,
            "shown_at": shown_from[2] if shown_from else None,
            "assistant": assistant_key(assistant) if assistant is not None else None,
            **_scoring(cfg, now or datetime.now(UTC)),
        }
        if not cfg.events:
            return await self._messages_and_facts(tenant_id, user_id, cfg, params)
        # Two statements at once, on two connections: a step waits for the slower, not both.
        found, events = await asyncio.gather(
            self._messages_and_facts(tenant_id, user_id, cfg, params),
            self._events(params))
        return found + events

    async def _messages_and_facts(
        self, tenant_id: str, user_id: str, cfg: RecallConfig, params: dict[str, Any]
    ) -> list[Candidate]:
        owner = (tenant_id, user_id)
        async with connect(self._db) as conn:
            if owner in self._small:
                rows = await fetch(conn, for_small_users(
                    cfg.candidates, cfg.keyword_scan, self._ann_from), params)
            else:
                async with transaction(conn):
                    await conn.raw.execute(_PLANNED_FOR_ITS_USER)
                    rows = await fetch(conn, _FOR_ANY_USER, params)
        found = []
        for row in rows:
            if row["source"] == "user":  # whether the user's rows go into the index
                self._learn(owner, small=not row["indexed"])
            else:
                found.append(candidate_of(row))
        return found

    async def _events(self, params: dict[str, Any]) -> list[Candidate]:
        async with connect(self._db) as conn:
            return await event_candidates(conn, params)

    def _learn(self, owner: tuple[str, str], *, small: bool) -> None:
        if not small:
            self._small.discard(owner)
        elif owner not in self._small:
            if len(self._small) >= _MAX_KNOWN_SMALL:
                self._small.clear()
            self._small.add(owner)


# The ranking keeps at most `max_items` of the candidates, walking them best first; it passes
# over near-duplicates and items too long for the room left, and three times as many leave it
# room for that (bench/HISTORY.md, session 12: what the cut changed in the recall benchmark).
SHORTLIST = 3


def _scoring(cfg: RecallConfig, now: datetime) -> dict[str, Any]:
    """The parameters of SCORE: the weights of the ranking (memory/ranking.py `_parts`)."""
    return {
        "w_dense": 0.0 if cfg.mode == "keyword" else cfg.dense_weight,
        "w_keyword": 0.0 if cfg.mode == "dense" else cfg.keyword_weight,
        "rrf_k": cfg.rrf_k, "floor": cfg.recency_floor, "half_life": cfg.half_life_days,
        "fresh": cfg.freshness_days, "now": now, "w_fact": cfg.fact_weight,
        "w_user": cfg.user_weight, "w_assistant": cfg.assistant_weight,
        "shortlist": SHORTLIST * cfg.max_items,
        "k1": cfg.bm25_k1, "b": cfg.bm25_b, "min_similarity": cfg.min_similarity,
        "min_keyword": cfg.min_keyword, "expand": cfg.fact_expansion,
        "expand_sources": cfg.expansion_sources,
        "graph": cfg.graph, "graph_keywords": cfg.graph_keywords, "late": cfg.rerank,
    }

"""Which users' vectors go into the HNSW indexes (migration 0008).

A user's message vectors and fact vectors are written outside the HNSW indexes (`ann` false)
until the user has `ann_from` of either, counted in `recall_owners`; then every row of the user
joins the indexes, and rows written later go straight in. Below the threshold recall scans the
user's rows exactly, as the planner would choose for so few rows anyway, and each write skips
the index (~0.2 ms of Postgres a row). The writers (memory/indexer.py for messages,
memory/store.py for facts) hold the user's `recall_owners` row for their transaction, so a user
never joins the index half-way through a write of theirs.
"""

from __future__ import annotations

import logging

from sqlalchemy import text

from chat.tables import Driver, fetch

log = logging.getLogger("jin.memory")

ANN_FROM = 1000  # the default threshold (JIN_RECALL_ANN_FROM)

_JOIN_INDEX = text("""
WITH o AS (
    UPDATE recall_owners SET ann = true WHERE tenant_id = :t AND user_id = :u
), m AS (
    UPDATE message_embeddings SET ann = true
    WHERE tenant_id = :t AND user_id = :u AND NOT ann
)
UPDATE memories SET ann = true WHERE tenant_id = :t AND user_id = :u AND NOT ann""")


async def join_index(conn: Driver, tenant_id: str, user_id: str, why: str) -> None:
    """Every row of the user into the HNSW indexes, on the writer's transaction."""
    await fetch(conn, _JOIN_INDEX, {"t": tenant_id, "u": user_id})
    log.info("user %s/%s has %s: their vectors join the HNSW indexes", tenant_id, user_id, why)

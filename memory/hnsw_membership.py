"""Which users' vectors go into the HNSW indexes (migration 0008).

A user's message vectors and fact vectors are written outside the HNSW indexes (`ann` false)
until the user has `ann_from` of either, counted in `recall_owners`; then every row of the user
joins the indexes, and rows written later go straight in. Below the threshold recall scans the
user's rows exactly, as the planner would choose for so few rows anyway, and each write skips
the index (~0.2 ms of Postgres a row).

The writers (memory/indexer.py for messages, memory/store.py for facts) read the user's state
without locking it, write their rows, commit, and only then count them: no writer waits for
another's transaction on the user's row, and no writer holds rows of the tables while it waits
for the user's row, so joining the index (one statement that takes the user's row and the
user's rows) cannot deadlock with a write. A write that read the state just before the user
joined leaves its rows outside the index; recall finds them there all the same (its exact
part), and the writer, told by its count that the user is in, brings them in.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import text

from db.statements import Connection, fetch

log = logging.getLogger("jin.memory")

ANN_FROM = 1000  # the default threshold (JIN_RECALL_ANN_FROM)

# In one order, so that two writers' counts cannot deadlock on the users' rows.
_COUNT = {column: text(f"""
INSERT INTO recall_owners AS o (tenant_id, user_id, {column})
SELECT * FROM unnest(CAST(:tenants AS text[]), CAST(:users AS text[]), CAST(:counts AS bigint[]))
ORDER BY 1, 2
ON CONFLICT (tenant_id, user_id) DO UPDATE SET {column} = o.{column} + EXCLUDED.{column}
RETURNING o.tenant_id, o.user_id, o.{column} AS count, o.ann""")
          for column in ("messages", "facts")}

_JOIN_INDEX = text("""
WITH o AS (
    UPDATE recall_owners SET ann = true WHERE tenant_id = :t AND user_id = :u
), m AS (
    UPDATE message_embeddings SET ann = true
    WHERE tenant_id = :t AND user_id = :u AND NOT ann
)
UPDATE memories SET ann = true WHERE tenant_id = :t AND user_id = :u AND NOT ann""")

Owner = tuple[str, str]


def nearest(
    columns: str, table: str, where: str, vector: str, limit: str, *,
    indexed: bool, gate: str = "",
) -> str:
    """The `limit` rows of `table` nearest `vector`, as `columns` and their distance `d`. Not
    `indexed`: one exact scan (a user outside the HNSW index). `indexed`: the rows in the index
    by it, and any left outside by an exact scan; `gate`, a condition that the user is in the
    index, spares the index when not."""
    order = f"ORDER BY embedding <=> {vector} LIMIT {limit}"
    head = f"SELECT {columns}, embedding <=> {vector} AS d FROM {table} WHERE"
    if not indexed:
        return f"{head} {where} {order}"
    gated = f" AND {gate}" if gate else ""
    return (f"SELECT * FROM (({head} ann AND {where}{gated} {order}) UNION ALL "
            f"({head} NOT ann AND {where} {order})) x ORDER BY d LIMIT {limit}")


async def count_written(
    conn: Connection, what: str, written: Iterable[tuple[Owner, bool]], ann_from: int
) -> None:
    """Count committed rows (each its user and whether it went into the index) as `what`
    ("messages" or "facts"), outside any transaction; users who reach `ann_from`, and users in
    the index who got rows outside it, have all of their rows brought in."""
    counts: dict[Owner, int] = defaultdict(int)
    outside: set[Owner] = set()
    for owner, ann in written:
        counts[owner] += 1
        if not ann:
            outside.add(owner)
    if not counts:
        return
    owners = sorted(counts)
    rows = await fetch(conn, _COUNT[what], {
        "tenants": [t for t, _ in owners], "users": [u for _, u in owners],
        "counts": [counts[o] for o in owners]})
    for row in rows:
        owner = (row["tenant_id"], row["user_id"])
        if row["ann"] and owner not in outside:
            continue
        if row["ann"] or row["count"] >= ann_from:
            await fetch(conn, _JOIN_INDEX, {"t": owner[0], "u": owner[1]})
            if not row["ann"]:
                log.info("user %s/%s has %d %s: their vectors join the HNSW indexes",
                         owner[0], owner[1], row["count"], what)

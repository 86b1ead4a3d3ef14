"""Vectors stay in their rows: rows of facts and of message vectors up to 4 KB are not TOASTed.

Postgres moves a value out of its row once the row passes 2 KB. A fact's row (its text, the
normalized text, the full-text vector and 384 floats: ~2.6 KB) passed it, and so did a message
vector's row for a message of more than ~350 characters. The vector then lived in the TOAST
table, and every exact scan (recall's dense list of a user's facts, the flush's lookup of
duplicates, which scans them once per new fact) fetched each vector through the TOAST index:
~4 buffers a row instead of ~0.4. With the target at 4 KB the rows keep their vectors (of up to
~700 dimensions); longer rows are still TOASTed, their longest text compressed first.

For a user with 510 messages and 363 facts, Postgres CPU a call, 7 runs of each alternating
(bench/HISTORY.md, session 8): recall 5.4 -> 3.9 ms (medians), the flush's lookup of 5 new facts
6.2-6.8 -> 1.1-1.3 ms.

The upgrade changes a setting of each table under a lock that lets reads and writes go on
(SHARE UPDATE EXCLUSIVE), and rewrites nothing. So it serves new rows only: rows written before
keep their vectors where they are (read as before, more slowly) until the table is rewritten
(`VACUUM FULL`, or pg_repack without its lock).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TARGET = 4080  # half a page: a row stays in its page with one more


def _leaves() -> list[str]:
    """The tables that hold the rows: memories, and each partition of message_embeddings
    (storage parameters go on the partitions; the partitioned table takes none)."""
    rows = op.get_bind().execute(sa.text(
        "SELECT oid::regclass::text FROM pg_class WHERE relkind = 'r' "
        "AND (oid IN ('memories'::regclass, 'message_embeddings'::regclass) "
        "OR oid IN (SELECT relid FROM pg_partition_tree('message_embeddings'))) ORDER BY 1"))
    return [row[0] for row in rows]


def upgrade() -> None:
    for table in _leaves():
        op.execute(f"ALTER TABLE {table} SET (toast_tuple_target = {TARGET})")


def downgrade() -> None:
    for table in _leaves():
        op.execute(f"ALTER TABLE {table} RESET (toast_tuple_target)")

"""A user's vectors join the HNSW indexes once the user has enough of them to need them.

Every message vector and every fact vector went into an HNSW index, ~0.2 ms of Postgres a row,
and yet recall reads a small user's rows by the owner index and an exact scan: the planner sees
the owner's few rows and never takes the vector index for them (bench/recall_scale.py). So both
indexes are now partial, over rows with `ann`. `recall_owners` counts each user's message and
fact vectors; once either count reaches a threshold (memory/hnsw_membership.py), every row of
the user is turned to `ann` in the writer's transaction, and the user's later rows are written
with it.
Recall reads a user's `ann` rows by the index (when the user has any, as `recall_owners.ann`
says) and the others by an exact scan, helped by a small partial index of them
(`*_exact`), so every row stays reachable whatever state it is in.

The upgrade rewrites no row: the columns come with `true` for the rows there are (they are all
in the indexes today), and every user with rows is marked `ann`. It does build the HNSW indexes
anew (293 s for 1.3M rows on 2 cores, bench/README.md) before it drops the old ones:
recall keeps its index meanwhile, and only writes of vectors wait for the build.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


_TABLES = ("message_embeddings", "memories")


def upgrade() -> None:
    for table in _TABLES:
        op.add_column(table, sa.Column("ann", sa.Boolean, nullable=False,
                                       server_default=sa.true()))
        # Rows written without saying (by a worker of before this revision, during a rolling
        # upgrade) are read by the exact scan: found either way.
        op.alter_column(table, "ann", server_default=sa.false())
    op.create_table(
        "recall_owners",
        sa.Column("tenant_id", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, primary_key=True),
        # Vectors written for the user: a deleted chat's or a forgotten fact's are not taken
        # off, a message embedded again counts again. They only decide when `ann` turns on.
        sa.Column("messages", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("facts", sa.BigInteger, nullable=False, server_default="0"),
        # Whether the user's rows go into the HNSW indexes; never turned off again.
        sa.Column("ann", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.execute("""
        INSERT INTO recall_owners (tenant_id, user_id, messages, facts, ann)
        SELECT tenant_id, user_id, sum(messages), sum(facts), true FROM (
            SELECT tenant_id, user_id, count(*) AS messages, 0 AS facts
            FROM message_embeddings GROUP BY 1, 2
            UNION ALL
            SELECT tenant_id, user_id, 0, count(*) FROM memories GROUP BY 1, 2) x
        GROUP BY 1, 2""")
    for table in _TABLES:
        op.execute(f"CREATE INDEX {table}_ann ON {table} "
                   "USING hnsw (embedding vector_cosine_ops) WHERE ann")
        op.execute(f"DROP INDEX {table}_hnsw")
        op.execute(f"ALTER INDEX {table}_ann RENAME TO {table}_hnsw")
        op.execute(f"CREATE INDEX {table}_exact ON {table} (tenant_id, user_id) WHERE NOT ann")


def downgrade() -> None:
    for table in _TABLES:
        op.execute(f"DROP INDEX {table}_exact")
        op.execute(f"CREATE INDEX {table}_all ON {table} "
                   "USING hnsw (embedding vector_cosine_ops)")
        op.execute(f"DROP INDEX {table}_hnsw")
        op.execute(f"ALTER INDEX {table}_all RENAME TO {table}_hnsw")
        op.drop_column(table, "ann")
    op.drop_table("recall_owners")

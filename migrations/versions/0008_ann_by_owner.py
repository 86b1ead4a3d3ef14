"""A user's message vectors join the HNSW index once the user has enough of them to need it.

Every message vector went into the HNSW index, ~0.2 ms of Postgres a row, and yet recall reads a
small user's rows by the owner index and an exact scan: the planner sees the owner's few rows and
never takes the index for them (bench/recall_scale.py). So the index is now partial, over rows
with `ann`; `recall_owners` counts each user's vectors, and the indexer writes a user's rows with
`ann` once the count has reached a threshold (memory/indexer.py `ann_from`), turning on the
user's earlier rows in the same transaction. Recall reads a user's `ann` rows by the index (when
the user has any, as `recall_owners.ann` says) and the others by an exact scan over a small
partial index (`message_embeddings_exact`), so every row stays reachable whatever state it is in.

The upgrade rewrites no row: the column comes with `true` for the rows there are (they are all in
the index today), and every user with rows is marked `ann`. It does build the HNSW index anew
(~5 minutes a million rows on 2 cores, bench/README.md), before it drops the old one: recall keeps
its index meanwhile, and only the indexer's writes wait for the build.

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


def upgrade() -> None:
    op.add_column("message_embeddings", sa.Column(
        "ann", sa.Boolean, nullable=False, server_default=sa.true()))
    # Rows written without saying (by a worker of before this revision, during a rolling
    # upgrade) are read by the exact scan: found either way.
    op.alter_column("message_embeddings", "ann", server_default=sa.false())
    op.create_table(
        "recall_owners",
        sa.Column("tenant_id", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, primary_key=True),
        # Vectors written for the user: a deleted chat's are not taken off, a message embedded
        # again counts again (memory/indexer.py). It only decides when `ann` turns on.
        sa.Column("messages", sa.BigInteger, nullable=False, server_default="0"),
        # Whether the user's rows go into the HNSW index; never turned off again.
        sa.Column("ann", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.execute("""
        INSERT INTO recall_owners (tenant_id, user_id, messages, ann)
        SELECT tenant_id, user_id, count(*), true FROM message_embeddings GROUP BY 1, 2""")
    op.execute("CREATE INDEX message_embeddings_ann ON message_embeddings "
               "USING hnsw (embedding vector_cosine_ops) WHERE ann")
    op.execute("DROP INDEX message_embeddings_hnsw")
    op.execute("ALTER INDEX message_embeddings_ann RENAME TO message_embeddings_hnsw")
    op.execute("CREATE INDEX message_embeddings_exact ON message_embeddings "
               "(tenant_id, user_id) WHERE NOT ann")


def downgrade() -> None:
    op.execute("DROP INDEX message_embeddings_exact")
    op.execute("CREATE INDEX message_embeddings_all ON message_embeddings "
               "USING hnsw (embedding vector_cosine_ops)")
    op.execute("DROP INDEX message_embeddings_hnsw")
    op.execute("ALTER INDEX message_embeddings_all RENAME TO message_embeddings_hnsw")
    op.drop_table("recall_owners")
    op.drop_column("message_embeddings", "ann")

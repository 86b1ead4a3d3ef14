"""Recall: the indexing queue, multilingual full text, fact history, the deployment's dimension.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import postgresql as pg

from migrations.embedding_dim import DEFAULT_DIM, configured_dim, current_dim, resize

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# Latin words are stemmed as English, Cyrillic words as Russian (Postgres has no Ukrainian
# stemmer; the Russian one shares most endings, and the query side adds prefix matches).
_SEARCH_CONFIG = """
CREATE TEXT SEARCH CONFIGURATION jin_search (COPY = simple);
ALTER TEXT SEARCH CONFIGURATION jin_search
    ALTER MAPPING FOR asciiword, asciihword, hword_asciipart WITH english_stem;
ALTER TEXT SEARCH CONFIGURATION jin_search
    ALTER MAPPING FOR word, hword, hword_part WITH russian_stem;
"""


# Messages written before this revision are queued as backfill, behind live messages, so an
# upgraded deployment's history becomes recallable without a manual step. All of them: a vector
# written before, if any, came with full text that was not built with `jin_search`.
_BACKFILL = """
INSERT INTO recall_queue (message_id, priority)
SELECT id, 1 FROM messages
WHERE kind IN ('user', 'assistant') AND content <> '' AND status IN ('complete', 'interrupted')
"""

_CURRENT_FACT = sa.text("valid_to IS NULL")


def upgrade() -> None:
    for statement in _SEARCH_CONFIG.split(";"):
        if statement.strip():
            op.execute(statement)

    # Messages waiting for their embedding; a worker claims a batch for `claimed_until`.
    op.create_table(
        "recall_queue",
        sa.Column(
            "message_id", pg.UUID(as_uuid=True),
            sa.ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True,
        ),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.text("now()")),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        # 0: live messages; 1: backfill (this upgrade, `jin reindex`, a resize), served after.
        sa.Column("priority", sa.SmallInteger, nullable=False, server_default="0"),
        # Failures of this message embedded alone; after a few it is parked (`parked_at`), and
        # no claim takes it again until `jin reindex` retries it.
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("parked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("recall_queue_order", "recall_queue", ["priority", "enqueued_at"],
                    postgresql_where=sa.text("parked_at IS NULL"))
    op.execute(_BACKFILL)

    op.drop_index("message_embeddings_owner", table_name="message_embeddings")
    op.create_index("message_embeddings_owner", "message_embeddings",
                    ["tenant_id", "user_id", "created_at"])

    op.add_column("memories", sa.Column("embedder", sa.Text, nullable=True))
    op.add_column("memories", sa.Column("superseded_by", pg.UUID(as_uuid=True), nullable=True))
    # Before this revision only the memory flush wrote facts: the rows there are its; new rows
    # default to the memory tool's.
    op.add_column("memories", sa.Column("origin", sa.Text, nullable=False,
                                        server_default="flush"))
    op.alter_column("memories", "origin", server_default="tool")
    op.add_column("memories", sa.Column(
        "content_tsv", pg.TSVECTOR,
        sa.Computed("to_tsvector('jin_search'::regconfig, text)", persisted=True),
    ))
    op.create_index("memories_tsv", "memories", ["content_tsv"], postgresql_using="gin")
    op.create_index("memories_owner", "memories", ["tenant_id", "user_id", "updated_at"])
    # A btree entry holds at most 2704 bytes, less than a long fact in a non-Latin script (2,000
    # CJK characters are 6,000 bytes): the unique key is the text's hash. memory/store.py
    # compares the hash (to use this index) and the text (so a collision cannot match).
    op.drop_index("memories_current", table_name="memories")
    op.create_index("memories_current", "memories",
                    ["tenant_id", "user_id", sa.text("md5(normalized)")], unique=True,
                    postgresql_where=_CURRENT_FACT)

    dim = configured_dim(context.config.attributes)
    if dim != DEFAULT_DIM:
        resize(op, dim)


def downgrade() -> None:
    if current_dim(op.get_bind()) != DEFAULT_DIM:
        resize(op, DEFAULT_DIM)
    # Fails if a current fact is too long for a btree entry: shorten or end such facts first.
    op.drop_index("memories_current", table_name="memories")
    op.create_index("memories_current", "memories", ["tenant_id", "user_id", "normalized"],
                    unique=True, postgresql_where=_CURRENT_FACT)
    op.drop_index("memories_owner", table_name="memories")
    op.drop_index("memories_tsv", table_name="memories")
    for column in ("content_tsv", "origin", "superseded_by", "embedder"):
        op.drop_column("memories", column)
    op.drop_index("message_embeddings_owner", table_name="message_embeddings")
    op.create_index("message_embeddings_owner", "message_embeddings", ["tenant_id", "user_id"])
    op.drop_table("recall_queue")
    op.execute("DROP TEXT SEARCH CONFIGURATION jin_search")

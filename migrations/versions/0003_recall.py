"""Recall: the indexing queue, multilingual full text, fact history, the deployment's dimension.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import postgresql as pg

from migrations.embedding_dim import DEFAULT_DIM, configured_dim, resize

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
    )
    op.create_index("recall_queue_order", "recall_queue", ["enqueued_at"])

    op.add_column("message_embeddings", sa.Column("kind", sa.Text, nullable=False,
                                                  server_default="user"))
    op.drop_index("message_embeddings_owner", table_name="message_embeddings")
    op.create_index("message_embeddings_owner", "message_embeddings",
                    ["tenant_id", "user_id", "created_at"])

    op.add_column("memories", sa.Column("embedder", sa.Text, nullable=True))
    op.add_column("memories", sa.Column("superseded_by", pg.UUID(as_uuid=True), nullable=True))
    op.add_column("memories", sa.Column("origin", sa.Text, nullable=False,
                                        server_default="tool"))
    op.add_column("memories", sa.Column(
        "content_tsv", pg.TSVECTOR,
        sa.Computed("to_tsvector('jin_search'::regconfig, text)", persisted=True),
    ))
    op.create_index("memories_tsv", "memories", ["content_tsv"], postgresql_using="gin")
    op.create_index("memories_owner", "memories", ["tenant_id", "user_id", "updated_at"])

    dim = configured_dim(context.config.attributes)
    if dim != DEFAULT_DIM:
        resize(op, dim)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.execute(sa.text(
        "SELECT atttypmod FROM pg_attribute "
        "WHERE attrelid = 'message_embeddings'::regclass AND attname = 'embedding'"
    )).scalar_one() != DEFAULT_DIM:
        resize(op, DEFAULT_DIM)
    op.drop_index("memories_owner", table_name="memories")
    op.drop_index("memories_tsv", table_name="memories")
    for column in ("content_tsv", "origin", "superseded_by", "embedder"):
        op.drop_column("memories", column)
    op.drop_index("message_embeddings_owner", table_name="message_embeddings")
    op.create_index("message_embeddings_owner", "message_embeddings", ["tenant_id", "user_id"])
    op.drop_column("message_embeddings", "kind")
    op.drop_table("recall_queue")
    op.execute("DROP TEXT SEARCH CONFIGURATION jin_search")

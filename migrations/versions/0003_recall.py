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

PARTITIONS = 16
_EMBEDDING_COLUMNS = """
    message_id uuid NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    chat_id uuid NOT NULL,
    tenant_id text NOT NULL,
    user_id text NOT NULL,
    embedding vector({dim}) NOT NULL,
    content_tsv tsvector NOT NULL,
    embedder text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()"""


def _partitioned_embeddings(dim: int) -> list[str]:
    columns = _EMBEDDING_COLUMNS.format(dim=dim)
    return [
        f"CREATE TABLE message_embeddings ({columns},\n"
        "    PRIMARY KEY (tenant_id, user_id, message_id)\n"
        ") PARTITION BY HASH (tenant_id, user_id)",
        *(f"CREATE TABLE message_embeddings_p{i} PARTITION OF message_embeddings "
          f"FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {i})" for i in range(PARTITIONS)),
        *_embedding_indexes(),
        "CREATE INDEX message_embeddings_owner ON message_embeddings "
        "(tenant_id, user_id, created_at)",
        "CREATE INDEX message_embeddings_message ON message_embeddings (message_id)",
    ]


def _single_embeddings() -> list[str]:
    columns = _EMBEDDING_COLUMNS.format(dim=DEFAULT_DIM).replace(
        "message_id uuid NOT NULL", "message_id uuid PRIMARY KEY")
    return [
        f"CREATE TABLE message_embeddings ({columns})",
        *_embedding_indexes(),
        "CREATE INDEX message_embeddings_owner ON message_embeddings (tenant_id, user_id)",
    ]


def _embedding_indexes() -> list[str]:
    return [
        "CREATE INDEX message_embeddings_hnsw ON message_embeddings "
        "USING hnsw (embedding vector_cosine_ops)",
        "CREATE INDEX message_embeddings_tsv ON message_embeddings USING gin (content_tsv)",
    ]


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

    # Vectors from before are re-embedded anyway (the backfill above), so the table is made anew,
    # hash-partitioned by owner: a user's rows share a partition, whose HNSW index then serves
    # small users too (bench/README.md: 10,000 memories among 1.3M rows, p50 19 ms through the
    # owner index of one table, 1.6 ms in 16 partitions).
    op.drop_table("message_embeddings")
    for statement in _partitioned_embeddings(DEFAULT_DIM):
        op.execute(statement)

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
    # Back to 0001's single table; its vectors are gone (re-embedded after the next upgrade).
    op.drop_table("message_embeddings")
    for statement in _single_embeddings():
        op.execute(statement)
    op.drop_table("recall_queue")
    op.execute("DROP TEXT SEARCH CONFIGURATION jin_search")

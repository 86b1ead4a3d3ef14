"""Event and entity memory (VikingMem, ../shared/DESIGN.md section 8): events, entity cards with
every version, and the extraction batches the background worker claims.

A chat's finished turns are cut into `extraction_batches` (positions `first_position` ..
`last_position`, unique per chat, so two workers cannot both cut the same turns). A worker claims
a pending batch with `holder` and `claimed_until`; the batch is marked done in the transaction
that writes its events and entity versions, and only by its holder, so a batch is never
extracted twice, and one whose worker died goes back once its claim runs out. `events` and
`entities` carry a vector like the other recall rows, of the deployment's dimension
(migrations/embedding_dim.py resizes them with the others).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-03
"""

from typing import Any

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

from migrations.embedding_dim import current_dim

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

NOW = sa.text("now()")
NO_IDS = sa.text("'{}'::uuid[]")


def _uuid(name: str, *args: Any, **kw: Any) -> sa.Column:
    return sa.Column(name, pg.UUID(as_uuid=True), *args, **kw)


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable,
                     server_default=None if nullable else NOW)


def upgrade() -> None:
    dim = current_dim(op.get_bind())
    op.create_table(
        "extraction_batches",
        _uuid("id", primary_key=True),
        _uuid("chat_id", sa.ForeignKey("chats.id", ondelete="CASCADE"), nullable=False),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        _uuid("first_message_id", nullable=False),
        _uuid("last_message_id", nullable=False),
        sa.Column("first_position", sa.BigInteger, nullable=False),
        sa.Column("last_position", sa.BigInteger, nullable=False),
        # pending -> running (claimed) -> done; failed after `attempts` helper failures.
        sa.Column("status", sa.Text, nullable=False, server_default="pending"),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        _uuid("holder", nullable=True),
        _ts("claimed_until", nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        # What the extraction came to: items kept (events + entity updates applied), items
        # dropped, and whether a batch with content yielded nothing (OpenViking #4580).
        sa.Column("items", sa.Integer, nullable=False, server_default="0"),
        sa.Column("dropped", sa.Integer, nullable=False, server_default="0"),
        sa.Column("empty", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("drops", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("prompt", sa.Text, nullable=True),  # the prompt's digest (prompt.py)
        _ts("created_at"),
        _ts("finished_at", nullable=True),
        sa.UniqueConstraint("chat_id", "first_position", name="extraction_batches_chat_first"),
        sa.CheckConstraint("status IN ('pending','running','done','failed')",
                           name="extraction_batch_status"),
    )
    op.create_index("extraction_batches_open", "extraction_batches", ["created_at"],
                    postgresql_where=sa.text("status IN ('pending','running')"))
    op.create_index("extraction_batches_chat", "extraction_batches",
                    ["chat_id", "last_position"])

    op.create_table(
        "events",
        _uuid("id", primary_key=True),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        # An event outlives its chat, as facts do.
        _uuid("chat_id", sa.ForeignKey("chats.id", ondelete="SET NULL"), nullable=True),
        _uuid("batch_id", sa.ForeignKey("extraction_batches.id", ondelete="SET NULL"),
              nullable=True),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("topic", sa.Text, nullable=False),
        sa.Column("properties", pg.JSONB, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("source_message_ids", pg.ARRAY(pg.UUID(as_uuid=True)), nullable=False,
                  server_default=NO_IDS),
        sa.Column("embedding", Vector(dim), nullable=True),
        sa.Column("embedder", sa.Text, nullable=True),
        # When it happened: its first and last source message.
        _ts("started_at"),
        _ts("ended_at"),
        _ts("created_at"),
        # TIME_COMPRESS: the summary event it was merged into, and when it may be purged.
        _uuid("compressed_into", sa.ForeignKey("events.id", ondelete="SET NULL"),
              nullable=True),
        _ts("expires_at", nullable=True),
    )
    op.create_index("events_owner", "events", ["tenant_id", "user_id", "created_at", "id"])
    op.execute("CREATE INDEX events_hnsw ON events USING hnsw (embedding vector_cosine_ops)")

    op.create_table(
        "entities",
        _uuid("id", primary_key=True),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("key", sa.Text, nullable=False, server_default=""),  # '' unless by topic
        sa.Column("fields", pg.JSONB, nullable=False),
        sa.Column("card", sa.Text, nullable=False),  # the fields as the prompt shows them
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("embedding", Vector(dim), nullable=True),
        sa.Column("embedder", sa.Text, nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.UniqueConstraint("tenant_id", "user_id", "type", "key", name="entities_owner_key"),
    )
    op.create_index("entities_owner", "entities", ["tenant_id", "user_id", "updated_at", "id"])
    op.execute("CREATE INDEX entities_hnsw ON entities USING hnsw (embedding vector_cosine_ops)")

    op.create_table(
        "entity_versions",
        _uuid("entity_id", sa.ForeignKey("entities.id", ondelete="CASCADE"), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("fields", pg.JSONB, nullable=False),
        sa.Column("card", sa.Text, nullable=False),
        # The updates that made it: each field's op and value (a patch's blocks as the helper
        # wrote them).
        sa.Column("patch", sa.Text, nullable=False),
        sa.Column("source_event_ids", pg.ARRAY(pg.UUID(as_uuid=True)), nullable=False,
                  server_default=NO_IDS),
        _uuid("batch_id", sa.ForeignKey("extraction_batches.id", ondelete="SET NULL"),
              nullable=True),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("entity_id", "version", name="entity_versions_pkey"),
    )


def downgrade() -> None:
    op.drop_table("entity_versions")
    op.drop_table("entities")
    op.drop_table("events")
    op.drop_table("extraction_batches")

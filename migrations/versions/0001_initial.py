"""Chats, messages, steps, and the recall tables (message embeddings, durable facts).

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

EMBEDDING_DIM = 384
NOW = sa.text("now()")


def _ts(name: str, nullable: bool = False) -> sa.Column:
    default = None if nullable else NOW
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable, server_default=default)


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.create_table(
        "chats",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("title", sa.Text, nullable=False, server_default=""),
        sa.Column("system_prompt", sa.Text, nullable=False, server_default=""),
        sa.Column("settings", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("busy_policy", sa.Text, nullable=False, server_default="queue"),
        sa.Column("last_position", sa.BigInteger, nullable=False, server_default="0"),
        # Running total of the prompt cost (tokens + per-message overhead) of visible rows.
        sa.Column("token_total", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("lease_step_id", pg.UUID(as_uuid=True), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.CheckConstraint("busy_policy IN ('queue','reject','interrupt')", name="busy_policy"),
    )
    op.create_index("chats_by_owner", "chats", ["tenant_id", "user_id", "created_at", "id"])
    op.create_index("chats_by_tenant", "chats", ["tenant_id", "created_at", "id"])

    op.create_table(
        "messages",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column(
            "chat_id", pg.UUID(as_uuid=True), sa.ForeignKey("chats.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("content", sa.Text, nullable=False, server_default=""),
        sa.Column("reasoning", sa.Text, nullable=False, server_default=""),
        sa.Column("status", sa.Text, nullable=False, server_default="complete"),
        sa.Column("token_count", sa.Integer, nullable=False, server_default="0"),
        # The chat's token_total once this row was counted: the tail of a budget B is the rows
        # with tokens_after > token_total - B, an index range scan however long the chat.
        sa.Column("tokens_after", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("usage", pg.JSONB, nullable=True),
        sa.Column("step_id", pg.UUID(as_uuid=True), nullable=True),
        sa.Column("idempotency_key", sa.Text, nullable=True),
        sa.Column("meta", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        _ts("created_at"),
        sa.UniqueConstraint("chat_id", "position", name="messages_chat_position"),
        sa.CheckConstraint(
            "kind IN ('user','assistant','tool','system','summary','marker')", name="kind"
        ),
        sa.CheckConstraint(
            "status IN ('complete','streaming','interrupted','failed')", name="status"
        ),
    )
    op.create_index(
        "messages_idempotency", "messages", ["chat_id", "idempotency_key"], unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )
    op.create_index("messages_tail", "messages", ["chat_id", "tokens_after", "position"])
    op.create_index(
        "messages_summaries", "messages", ["chat_id", "position"],
        postgresql_where=sa.text("kind = 'summary'"),
    )
    op.create_index(
        "messages_streaming", "messages", ["chat_id"],
        postgresql_where=sa.text("status = 'streaming'"),
    )

    op.create_table(
        "steps",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column(
            "chat_id", pg.UUID(as_uuid=True), sa.ForeignKey("chats.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("status", sa.Text, nullable=False, server_default="running"),
        sa.Column("user_message_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("assistant_message_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("idempotency_key", sa.Text, nullable=True),
        sa.Column("abort_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("error_code", sa.Text, nullable=True),
        sa.Column("timings", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("worker", sa.Text, nullable=True),
        _ts("created_at"),
        _ts("finished_at", nullable=True),
        sa.CheckConstraint(
            "status IN ('running','complete','interrupted','failed')", name="step_status"
        ),
    )
    op.create_index(
        "steps_running", "steps", ["chat_id"], postgresql_where=sa.text("status = 'running'")
    )

    # Recall: every user and assistant message, embedded and full-text indexed.
    op.create_table(
        "message_embeddings",
        sa.Column(
            "message_id", pg.UUID(as_uuid=True),
            sa.ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True,
        ),
        sa.Column("chat_id", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("embedding", Vector(EMBEDDING_DIM), nullable=False),
        sa.Column("content_tsv", pg.TSVECTOR, nullable=False),
        sa.Column("embedder", sa.Text, nullable=False),
        _ts("created_at"),
    )
    op.execute(
        "CREATE INDEX message_embeddings_hnsw ON message_embeddings "
        "USING hnsw (embedding vector_cosine_ops)"
    )
    op.create_index(
        "message_embeddings_tsv", "message_embeddings", ["content_tsv"], postgresql_using="gin"
    )
    op.create_index("message_embeddings_owner", "message_embeddings", ["tenant_id", "user_id"])

    # Durable facts: what the agent or the memory flush chose to keep.
    op.create_table(
        "memories",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("normalized", sa.Text, nullable=False),
        sa.Column("embedding", Vector(EMBEDDING_DIM), nullable=True),
        sa.Column("importance", sa.Float, nullable=False, server_default="0.5"),
        sa.Column(
            "source_message_ids", pg.ARRAY(pg.UUID(as_uuid=True)), nullable=False,
            server_default=sa.text("'{}'::uuid[]"),
        ),
        _ts("valid_from"),
        _ts("valid_to", nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
    )
    op.create_index(
        "memories_current", "memories", ["tenant_id", "user_id", "normalized"], unique=True,
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.execute(
        "CREATE INDEX memories_hnsw ON memories USING hnsw (embedding vector_cosine_ops)"
    )


def downgrade() -> None:
    op.drop_table("memories")
    op.drop_table("message_embeddings")
    op.drop_table("steps")
    op.drop_table("messages")
    op.drop_table("chats")
    # The vector extension is left in place: other schemas in the database may use it.

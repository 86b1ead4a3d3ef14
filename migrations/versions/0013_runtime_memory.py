"""L1 runtime memory: every version of a chat's state, and who is rewriting it.

`runtime_memory_versions` holds one row per version of a chat's state (its lines with their
strengths, and the tombstones of lines the user deleted), with the position of the last answer
it reflects: a step that finds answers after it redoes the update (a worker that died
mid-update loses nothing). `runtime_memory_claims` is a lease with expiry, not a lock held
across the helper call: one worker at a time rewrites a chat's state, and a dead worker's claim
runs out.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runtime_memory_versions",
        sa.Column("chat_id", pg.UUID(as_uuid=True), sa.ForeignKey("chats.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("state", pg.JSONB, nullable=False),
        # The last answer the state reflects (its position), or none yet.
        sa.Column("through_position", sa.BigInteger, nullable=True),
        # update (the helper's rewrite), unresolved, deleted, durable
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("meta", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("chat_id", "version", name="runtime_memory_versions_pkey"),
    )
    op.create_table(
        "runtime_memory_claims",
        sa.Column("chat_id", pg.UUID(as_uuid=True), sa.ForeignKey("chats.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("holder", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("runtime_memory_claims")
    op.drop_table("runtime_memory_versions")

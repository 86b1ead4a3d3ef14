"""L2 pattern memory: every version of a chat's patterns, who is distilling them, and alerts.

`runtime_pattern_versions` holds one row per version of a chat's L2 patterns, with the newest L1
version and the last answer it read: the next step counts the turns since it (a worker that died
mid-way loses nothing; the rule fires again). `runtime_pattern_claims` is a lease with expiry,
as for L1: one worker at a time distils a chat's patterns. `runtime_memory_alerts` holds what L2
noticed about L1 (`stale_l1`: an update that changed no line while the user wrote), once per
type and L1 version.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runtime_pattern_versions",
        sa.Column("chat_id", pg.UUID(as_uuid=True), sa.ForeignKey("chats.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("patterns", pg.JSONB, nullable=False),
        sa.Column("l1_version", sa.Integer, nullable=False),
        sa.Column("through_position", sa.BigInteger, nullable=True),
        sa.Column("meta", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("chat_id", "version", name="runtime_pattern_versions_pkey"),
    )
    op.create_table(
        "runtime_pattern_claims",
        sa.Column("chat_id", pg.UUID(as_uuid=True), sa.ForeignKey("chats.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("holder", pg.UUID(as_uuid=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "runtime_memory_alerts",
        sa.Column("chat_id", pg.UUID(as_uuid=True), sa.ForeignKey("chats.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("l1_version", sa.Integer, nullable=False),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("detail", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("chat_id", "type", "l1_version",
                                name="runtime_memory_alerts_pkey"),
    )


def downgrade() -> None:
    op.drop_table("runtime_memory_alerts")
    op.drop_table("runtime_pattern_claims")
    op.drop_table("runtime_pattern_versions")

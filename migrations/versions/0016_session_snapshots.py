"""L3 session snapshots: a digest of a chat's session, saved on request, per user; a new chat
can start from one.

`session_snapshots` holds each snapshot with what it was built from (a copy of the chat's L1
state, and of its L2 patterns when a deployment has them) and the digest the helper wrote (or
jin, when the helper failed: `digest_source`). The source chat may be deleted later: the
snapshot is the user's and stays (`chat_id` goes null). `chats.from_snapshot` names the
snapshot a chat started from; it is no foreign key: a snapshot deleted later takes its digest
out of the chat's prompts, and the chat keeps the L1 it started with.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_snapshots",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("chat_id", pg.UUID(as_uuid=True),
                  sa.ForeignKey("chats.id", ondelete="SET NULL"), nullable=True),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("digest", sa.Text, nullable=False),
        # helper (the helper model wrote it) or fallback (jin wrote it from the L1 lines)
        sa.Column("digest_source", sa.Text, nullable=False),
        sa.Column("digest_tokens", sa.Integer, nullable=False),
        sa.Column("l1_state", pg.JSONB, nullable=False),
        sa.Column("l1_version", sa.Integer, nullable=True),
        sa.Column("l2_state", pg.JSONB, nullable=True),
        # how it was asked for: route, tool_call, marker
        sa.Column("via", sa.Text, nullable=False),
        sa.Column("meta", pg.JSONB, nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.func.now()),
    )
    op.create_index("session_snapshots_by_user", "session_snapshots",
                    ["tenant_id", "user_id", sa.text("created_at DESC"), sa.text("id DESC")])
    op.add_column("chats", sa.Column("from_snapshot", pg.UUID(as_uuid=True), nullable=True))


def downgrade() -> None:
    op.drop_column("chats", "from_snapshot")
    op.drop_index("session_snapshots_by_user", table_name="session_snapshots")
    op.drop_table("session_snapshots")

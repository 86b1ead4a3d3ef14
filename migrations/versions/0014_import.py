"""External ids: what `jin import` names a conversation and a message by, so a second import of
the same file writes nothing new.

A chat imported from a file carries its conversation's id in the source (a ChatGPT export's
conversation id, a jin JSONL's conversation and session, or a hash of an OpenAI messages line),
unique per user; its messages carry theirs, unique per chat. An import that stopped half-way
finds what it wrote and goes on after it. Rows written by steps have none, and no index entry
(partial indexes). Built concurrently, outside the migration's transaction, as 0006: `messages`
is the largest table, and steps keep writing while the index builds.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("chats", sa.Column("external_id", sa.Text, nullable=True))
    op.add_column("messages", sa.Column("external_id", sa.Text, nullable=True))
    with op.get_context().autocommit_block():
        op.create_index("chats_external", "chats", ["tenant_id", "user_id", "external_id"],
                        unique=True, postgresql_where=sa.text("external_id IS NOT NULL"),
                        postgresql_concurrently=True)
        op.create_index("messages_external", "messages", ["chat_id", "external_id"],
                        unique=True, postgresql_where=sa.text("external_id IS NOT NULL"),
                        postgresql_concurrently=True)


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index("messages_external", table_name="messages", postgresql_concurrently=True)
        op.drop_index("chats_external", table_name="chats", postgresql_concurrently=True)
    op.drop_column("messages", "external_id")
    op.drop_column("chats", "external_id")

"""Steps are found by chat and idempotency key through an index.

A step sent with an `idempotency_key` first looks for an earlier step of the chat with that key,
and deleting a chat deletes its steps: both scanned the whole `steps` table, which every step of
every chat grows by one row. Built concurrently, outside the migration's transaction: steps keep
opening while it builds. (A build that fails half-way leaves an invalid index of that name:
drop it before running the upgrade again.)

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Unique like the messages' key (messages_idempotency): one step per key and chat.
    with op.get_context().autocommit_block():
        op.create_index("steps_chat_key", "steps", ["chat_id", "idempotency_key"], unique=True,
                        postgresql_concurrently=True)


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index("steps_chat_key", table_name="steps", postgresql_concurrently=True)

"""Steps are found by chat and idempotency key through an index.

A step sent with an `idempotency_key` first looks for an earlier step of the chat with that key,
and deleting a chat deletes its steps: both scanned the whole `steps` table, which every step of
every chat grows by one row.

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
    op.create_index("steps_chat_key", "steps", ["chat_id", "idempotency_key"], unique=True)


def downgrade() -> None:
    op.drop_index("steps_chat_key", table_name="steps")

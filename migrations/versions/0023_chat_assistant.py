"""A chat's assistant: the name of the assistant the user talks to in it (`POST /v1/chats`
`assistant`, default "" for the deployment's one assistant).

Entity types grouped by `user_and_assistant` (memory/events/schema.py) keep one card per user
and assistant: its `entities.key` is "@" and the assistant's name (memory/events/cards.py), and
a chat's extraction and recall read only the cards of its own assistant.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("chats", sa.Column("assistant", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("chats", "assistant")

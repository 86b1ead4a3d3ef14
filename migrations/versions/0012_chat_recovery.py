"""chats.recovery: what the stream validator stopped in the chat's last answer.

The next step's prompt carries a recovery note made of it (orchestrator/context.py). It lives on
the chat, not on the answer's row: an answer stopped in its reasoning, before any text, has an
empty row that no window shows, and a final row never changes (0010). Written by the step's
finish, cleared by the next step that completes.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("chats", sa.Column("recovery", postgresql.JSONB, nullable=True))


def downgrade() -> None:
    op.drop_column("chats", "recovery")

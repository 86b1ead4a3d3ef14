"""Recall tells the window's rows by position: message_embeddings.position.

A step's recall must not return what its window already shows. That was a list of the window's
message ids (up to a budget's worth, ~100) in the recall statement; against a partitioned table
Postgres's planner compares such a list with itself element by element, and planning the
statement took 4.4 ms with 100 ids against 0.5 ms without (bench/README.md). The window's rows
of the chat are the ones from the tail's first position on, so a position per row says the same
with two values.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("message_embeddings", sa.Column("position", sa.BigInteger, nullable=True))
    op.execute(
        "UPDATE message_embeddings e SET position = m.position FROM messages m "
        "WHERE m.id = e.message_id"
    )
    op.alter_column("message_embeddings", "position", nullable=False)


def downgrade() -> None:
    op.drop_column("message_embeddings", "position")

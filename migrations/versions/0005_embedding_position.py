"""Recall tells the window's rows by position: message_embeddings.position.

A step's recall must not return what its window already shows. That was a list of the window's
message ids (up to a budget's worth, ~100) in the recall statement; against a partitioned table
Postgres's planner compares such a list with itself element by element, and planning the
statement took 4.4 ms with 100 ids against 0.5 ms without (bench/README.md). The window's rows
of the chat are the ones from the tail's first position on, so a position per row says the same
with two values.

The column is added empty and nullable, which takes no time whatever the table's size:
rewriting every row would also insert every row again into the HNSW index (~0.5 ms a row).
Rows indexed before this revision, and any that an older worker writes during a rolling
upgrade, have no position; recall tells them by time instead (the window's first row's), which
is the same for every message a step wrote (their time grows with their position) and close
for imported history.

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


def downgrade() -> None:
    op.drop_column("message_embeddings", "position")

"""Events keep their token vectors for late-interaction rerank (memory/late_interaction.py):
merged and int8-quantised, written with the event when the embedder gives them (the built-in
one does). NULL for an event written without, which the rerank then leaves as ranked.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("tokens", sa.LargeBinary, nullable=True))


def downgrade() -> None:
    op.drop_column("events", "tokens")

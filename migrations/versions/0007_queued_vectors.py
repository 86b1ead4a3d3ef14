"""A queued message may bring its vector: the step's recall already embedded it.

A step embeds the user's message to recall with it; with an embedder that gives queries and
texts the same vector (MiniLM, any OpenAI-style endpoint; not e5), that is the vector the
indexer would make for the message. The step leaves it with the queued message, and the indexer
writes it instead of asking the embedder again: each user message is embedded once, not twice.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Any dimension: the indexer uses a vector only if it has the embedder's name and size.
    op.add_column("recall_queue", sa.Column("embedding", pg.ARRAY(sa.REAL), nullable=True))
    op.add_column("recall_queue", sa.Column("embedder", sa.Text, nullable=True))


def downgrade() -> None:
    op.drop_column("recall_queue", "embedder")
    op.drop_column("recall_queue", "embedding")

"""Events and entity cards join recall: the full text of each, kept by Postgres.

Recall's keyword lists rank events and cards by BM25 over their full-text vectors as they rank
messages and facts (memory/event_recall.py). The vectors are generated columns, like the facts'
(0003): an event's topic and summary, a card's text, written by Postgres whenever the row is,
so no writer can forget them. Their GIN indexes find a rare word's rows without reading the
user's others.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_TEXT = {
    "events": "to_tsvector('jin_search'::regconfig, topic || ' ' || summary)",
    "entities": "to_tsvector('jin_search'::regconfig, card)",
}


def upgrade() -> None:
    for table, expression in _TEXT.items():
        op.add_column(table, sa.Column("content_tsv", pg.TSVECTOR,
                                       sa.Computed(expression, persisted=True)))
        op.create_index(f"{table}_content_tsv", table, ["content_tsv"],
                        postgresql_using="gin")


def downgrade() -> None:
    for table in _TEXT:
        op.drop_index(f"{table}_content_tsv", table_name=table)
        op.drop_column(table, "content_tsv")

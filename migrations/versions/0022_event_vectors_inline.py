"""An event's vectors stay in its row: events are read whole by recall's exact scan of the
user's events (memory/event_recall.py), which computes the distance of each.

An event row holds two vectors (its text's and its turn's, 1,540 bytes each at 384 dimensions)
and its token vectors (~7.7 KB). Past Postgres's default of ~2 KB a row, the largest values go
to the TOAST table one by one: the token vectors, then one of the two vectors, the text's. Each
distance then read its vector back from the TOAST table: 25 ms for 10,000 events of a user,
against 5 ms for the vector kept in the row (bench/README.md, event recall). Rows are now
toasted only past 4,080 bytes, which the token vectors alone exceed, and the rows already
written get their text's vector back into the row.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE events SET (toast_tuple_target = 4080)")
    # (A new value, not the stored one: an unchanged value keeps its place in the TOAST table.)
    op.execute("UPDATE events SET embedding = CAST(CAST(embedding AS real[]) AS vector) "
               "WHERE embedding IS NOT NULL")


def downgrade() -> None:
    op.execute("ALTER TABLE events RESET (toast_tuple_target)")

"""TIME_COMPRESS written: summary events with pointers to their sources, the claim that keeps
two workers from merging one group twice, the purge's index, and what compression has done.

A summary event has a `level` (daily, weekly, monthly, yearly; NULL for an extracted event) and
`source_event_ids`, the events it merged: pointers kept after the purge has removed them (the
sources' own `compressed_into` points back while they live). A worker claims a group's events
(`compress_holder`, `compress_until`) before asking the helper for the summary's text, so a
second worker skips the group instead of paying for a second call; the summary and the sources'
`compressed_into` and `expires_at` are written in one transaction, so no source has a TTL whose
summary is not committed. `event_compression` counts summaries written and events merged and
purged, per tenant and user (purged rows leave no other trace).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("level", sa.Text, nullable=True))
    op.add_column("events", sa.Column(
        "source_event_ids", pg.ARRAY(pg.UUID(as_uuid=True)), nullable=False,
        server_default=sa.text("'{}'::uuid[]")))
    op.add_column("events", sa.Column("compress_holder", pg.UUID(as_uuid=True), nullable=True))
    op.add_column("events", sa.Column("compress_until", sa.DateTime(timezone=True),
                                      nullable=True))
    op.create_check_constraint(
        "events_level", "events",
        "level IS NULL OR level IN ('daily','weekly','monthly','yearly')")
    # The purge's scan, and a source's way back to its summary.
    op.create_index("events_expiring", "events", ["expires_at"],
                    postgresql_where=sa.text("expires_at IS NOT NULL"))
    op.create_index("events_compressed_into", "events", ["compressed_into"],
                    postgresql_where=sa.text("compressed_into IS NOT NULL"))
    op.create_table(
        "event_compression",
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("summaries", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("compressed", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("purged", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.text("now()")),
        sa.PrimaryKeyConstraint("tenant_id", "user_id", name="event_compression_pkey"),
    )


def downgrade() -> None:
    op.drop_table("event_compression")
    op.drop_index("events_compressed_into", table_name="events")
    op.drop_index("events_expiring", table_name="events")
    op.drop_constraint("events_level", "events", type_="check")
    for column in ("compress_until", "compress_holder", "source_event_ids", "level"):
        op.drop_column("events", column)

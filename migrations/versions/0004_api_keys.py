"""API keys: each belongs to a tenant; only a hash of the secret is stored.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False, server_default=""),
        # The first characters of the key, shown in lists so people can tell keys apart.
        sa.Column("prefix", sa.Text, nullable=False),
        # sha256 of the whole key: keys are 256 random bits, so a fast hash is enough.
        sa.Column("key_hash", sa.LargeBinary, nullable=False),
        sa.Column("admin", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.text("now()")),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("api_keys_hash", "api_keys", ["key_hash"], unique=True)
    op.create_index("api_keys_tenant", "api_keys", ["tenant_id", "created_at"])


def downgrade() -> None:
    op.drop_table("api_keys")

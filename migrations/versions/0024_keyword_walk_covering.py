"""The keyword list's walk reads no table rows: the owner index of message vectors carries what
the walk tests (its full-text vector) and what it returns.

Recall's keyword list (memory/recall_store.py `_KEYWORD`) takes a user's newest `keyword_scan`
rows that match the question. For a large user and words of middling frequency, the planner
walks the owner index (tenant, user, created_at) backwards, testing each row's `content_tsv`:
tens of thousands of rows, each read from the table (bench/README.md, recall at scale). With
`content_tsv`, `message_id`, `chat_id` and `position` in the index, the walk is index-only where
the visibility map allows (the pages vacuum has seen); the newest rows, not yet vacuumed, are
still read from the table as before.

The index replaces the old one under the same name (one index, wider: 273 MiB per 1.2M rows in
the benchmark). Building it takes a SHARE lock on message_embeddings: reads go on, the
indexer's writes wait for it (seconds per million rows).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX message_embeddings_owner_walk ON message_embeddings "
               "(tenant_id, user_id, created_at) INCLUDE (message_id, chat_id, position, "
               "content_tsv)")
    op.execute("DROP INDEX message_embeddings_owner")
    op.execute("ALTER INDEX message_embeddings_owner_walk RENAME TO message_embeddings_owner")


def downgrade() -> None:
    op.execute("CREATE INDEX message_embeddings_owner_plain ON message_embeddings "
               "(tenant_id, user_id, created_at)")
    op.execute("DROP INDEX message_embeddings_owner")
    op.execute("ALTER INDEX message_embeddings_owner_plain RENAME TO message_embeddings_owner")

"""The keyword list's walk reads no table rows for what fits in an index entry: a second owner
index of message vectors carries what the walk tests (the full-text vector) and returns, for
the rows whose vector is small enough.

Recall's keyword list (memory/recall_store.py `_KEYWORD`) takes a user's newest `keyword_scan`
rows that match the question. For a large user and words of middling frequency, the planner
walks the owner index (tenant, user, created_at) backwards, testing each row's `content_tsv`:
tens of thousands of rows, each read from the table (bench/README.md, recall at scale). An
index that carries `content_tsv`, `message_id`, `chat_id` and `position` makes that walk
index-only where the visibility map allows (the pages vacuum has seen).

A B-tree entry holds at most 2704 bytes, and the full-text vector of a long message is larger
(600 words: 13 KB): carried whole, such a message could not be written at all. So the walk is
split by `recall_walk_fits`, which bounds the entry's size from above (a vector's binary form
takes at most its text form's bytes plus 4 a lexeme, plus its header): the rows that fit are
walked in `message_embeddings_walk`, index-only; the others in `message_embeddings_long`, by the
owner and time alone, read from the table as before. The statement walks both and keeps the
newest matches of the two, the same rows as one walk. The plain owner index stays for every
other read by owner.

Building the indexes takes a SHARE lock on message_embeddings: reads go on, the indexer's
writes wait for it (seconds per million rows).

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
    # 2400 bytes of owner and vector, and what else an entry holds (its header, the time, two
    # ids and a position: ~70 bytes) stays under the 2704 of a B-tree entry.
    op.execute("""
CREATE FUNCTION recall_walk_fits(tenant text, owner text, v tsvector) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT octet_length(tenant) + octet_length(owner) + octet_length(v::text) + 4 * length(v)
           <= 2400
$$""")
    op.execute("CREATE INDEX message_embeddings_walk ON message_embeddings "
               "(tenant_id, user_id, created_at) INCLUDE (message_id, chat_id, position, "
               "content_tsv) WHERE recall_walk_fits(tenant_id, user_id, content_tsv)")
    op.execute("CREATE INDEX message_embeddings_long ON message_embeddings "
               "(tenant_id, user_id, created_at) "
               "WHERE NOT recall_walk_fits(tenant_id, user_id, content_tsv)")


def downgrade() -> None:
    op.execute("DROP INDEX message_embeddings_long")
    op.execute("DROP INDEX message_embeddings_walk")
    op.execute("DROP FUNCTION recall_walk_fits(text, text, tsvector)")

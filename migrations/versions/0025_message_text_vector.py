"""A message's full-text vector is drawn from its first 100,000 characters.

Postgres refuses a tsvector over 1 MB ("string is too long for tsvector"), and one message of
an imported history (a ChatGPT export holds pasted files and logs) can make one: 1 MB of short
distinct words makes a 1.4 MB vector. The statement that queued such a message for recall failed
with it, and so did the import of its whole conversation (`jin import` stopped there). The
first 100,000 characters, what a step accepts of a message it is sent (`JIN_MAX_MESSAGE_CHARS`),
always make a vector under 1 MB (at most ~50,000 lexemes of at most 4 bytes a character, 7 bytes
each of overhead and 2 a position); the embedder reads far less of a message than that anyway.

`recall_text_vector` is that vector, in one place for both writers: the trigger that writes a
queued message's keyword row (migration 0011) and the indexer (memory/indexer.py `_WRITE`).

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

# 0011's trigger body, with the vector drawn by `recall_text_vector`.
_ROWS_OF = """
INSERT INTO message_embeddings (message_id, chat_id, tenant_id, user_id, embedding,
                                content_tsv, embedder, created_at, position, ann)
SELECT m.id, m.chat_id, ch.tenant_id, ch.user_id, NULL, {vector}, NULL, m.created_at,
       m.position, COALESCE(o.ann, false)
FROM queued q JOIN messages m ON m.id = q.message_id JOIN chats ch ON ch.id = m.chat_id
LEFT JOIN recall_owners o ON o.tenant_id = ch.tenant_id AND o.user_id = ch.user_id
ON CONFLICT (tenant_id, user_id, message_id) DO NOTHING"""


def _trigger_body(vector: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION recall_keyword_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {_ROWS_OF.format(vector=vector)};
    RETURN NULL;
END
$$"""


def upgrade() -> None:
    op.execute("""
CREATE FUNCTION recall_text_vector(content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_tsvector('jin_search', left(content, 100000))
$$""")
    op.execute(_trigger_body("recall_text_vector(m.content)"))


def downgrade() -> None:
    op.execute(_trigger_body("to_tsvector('jin_search', m.content)"))
    op.execute("DROP FUNCTION recall_text_vector(text)")

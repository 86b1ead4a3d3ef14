"""Read-your-writes: a message is found by keyword the moment it is queued for recall.

Until now a message reached `message_embeddings` only when an indexer batch embedded it, so a
user who said something in one chat and asked for it in a new chat at once was answered without
it (7 times out of 8, measured from outside; found ~200 ms later). Now the statement that queues
a message (a step's, an import's, a dead step's cleanup, `jin reindex`) also writes its row of
`message_embeddings` with its full text and no vector yet, by a trigger on `recall_queue`: one
place for every writer. The keyword lists find the row at once; the dense lists take rows with
a vector only, and the indexer fills the vector in later (its upsert keeps the row).

The trigger is per statement, over the rows the statement queued (a transition table), so an
import of thousands of messages runs it once.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# The row the indexer will complete: the same columns it writes (memory/indexer.py _WRITE), less
# the vector and the embedder's name, for the messages queued in `{queued}`. A row already there
# (a message queued again to re-embed it with another model) is kept as it is.
_ROWS_OF = """
INSERT INTO message_embeddings (message_id, chat_id, tenant_id, user_id, embedding,
                                content_tsv, embedder, created_at, position, ann)
SELECT m.id, m.chat_id, ch.tenant_id, ch.user_id, NULL, to_tsvector('jin_search', m.content),
       NULL, m.created_at, m.position, COALESCE(o.ann, false)
FROM {queued} q JOIN messages m ON m.id = q.message_id JOIN chats ch ON ch.id = m.chat_id
LEFT JOIN recall_owners o ON o.tenant_id = ch.tenant_id AND o.user_id = ch.user_id
ON CONFLICT (tenant_id, user_id, message_id) DO NOTHING"""


def upgrade() -> None:
    op.execute("ALTER TABLE message_embeddings ALTER COLUMN embedding DROP NOT NULL, "
               "ALTER COLUMN embedder DROP NOT NULL")
    op.execute(f"""
CREATE FUNCTION recall_keyword_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {_ROWS_OF.format(queued="queued")};
    RETURN NULL;
END
$$""")
    op.execute("CREATE TRIGGER recall_keyword_rows AFTER INSERT ON recall_queue "
               "REFERENCING NEW TABLE AS queued FOR EACH STATEMENT "
               "EXECUTE FUNCTION recall_keyword_rows()")
    # What waits in the queue today is found by keyword from now on, too.
    op.execute(_ROWS_OF.format(queued="recall_queue"))


def downgrade() -> None:
    op.execute("DROP TRIGGER recall_keyword_rows ON recall_queue")
    op.execute("DROP FUNCTION recall_keyword_rows()")
    # Rows without a vector are still queued: the indexer writes them again once embedded.
    op.execute("DELETE FROM message_embeddings WHERE embedding IS NULL")
    op.execute("ALTER TABLE message_embeddings ALTER COLUMN embedding SET NOT NULL, "
               "ALTER COLUMN embedder SET NOT NULL")

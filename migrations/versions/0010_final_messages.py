"""A message that is no longer streaming never changes: Postgres rejects the UPDATE that would.

Workers keep the final rows of the windows they read and take them from there on the next read
(chat/window_cache.py); a row changed behind their back would go on being shown to the model as
it was. jin's own UPDATEs of messages only ever touch streaming rows (a running step's partial
text, its finish, a dead step's row marked interrupted: chat/steps.py); summary rows are
inserted, never updated; deletes (a chat's) are not UPDATEs. So a trigger rejects a change, on a
row whose status is not `streaming`, to what a window is made of: kind, position, text,
reasoning, status (a final row stays final), token counts and meta (tool calls). The other
columns (usage, created_at, ...) are not in a prompt.

The trigger's WHEN clause is all that runs for jin's own UPDATEs: the function is only called for
a rejected one.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_WINDOW = ("kind", "position", "content", "reasoning", "status", "token_count", "tokens_after",
           "meta")


def upgrade() -> None:
    op.execute("""
CREATE FUNCTION messages_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'message % is %: a message that is no longer streaming never changes',
                    OLD.id, OLD.status
        USING ERRCODE = 'check_violation', CONSTRAINT = 'messages_final',
              HINT = 'Workers keep final rows between steps (chat/window_cache.py). To change '
                     'one by hand, disable the trigger messages_final for it, then restart the '
                     'workers (or run them with JIN_WINDOW_CACHE_CHARS=0).';
END
$$""")
    new = ", ".join(f"NEW.{c}" for c in _WINDOW)
    old = ", ".join(f"OLD.{c}" for c in _WINDOW)
    op.execute(f"""
CREATE TRIGGER messages_final BEFORE UPDATE ON messages FOR EACH ROW
WHEN (OLD.status <> 'streaming' AND ({new}) IS DISTINCT FROM ({old}))
EXECUTE FUNCTION messages_final()""")


def downgrade() -> None:
    op.execute("DROP TRIGGER messages_final ON messages")
    op.execute("DROP FUNCTION messages_final()")

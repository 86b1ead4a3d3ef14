"""The keyword graph of event memory: each user's keywords, the events that hold them, and each
keyword's embedding, the mean of the embeddings of those events' segments (the text of the turns
each event came from, `events.segment_embedding`; an event without one, a summary, counts by
its own embedding).

Recall's graph path (memory/event_recall.py) finds the keywords nearest a question, by their
words or their embeddings, and walks to their events: "what should you call me?" is near the
turns where the user said "call me Sparky", so near the keyword "nickname" of the event those
turns gave, whose text ("attribute: nickname; value: Sparky") shares little with the question.
Extraction writes the links (memory/events/keywords.py says which words an event holds); the
keyword rows follow from the links alone, by trigger, so no writer or delete can leave a mean
that counts an event no longer there, nor a keyword with no event: an event deleted (by the API,
or purged after compression) takes its links with it, and the statement's trigger recomputes
the means of their keywords and drops those left without events.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql as pg

from migrations.embedding_dim import current_dim

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_OWNER = ["tenant_id", "user_id", "keyword"]

# (One function for both triggers: each names its transition table `changed`.)
_REFRESH = """
CREATE FUNCTION event_keywords_refresh() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH touched AS (SELECT DISTINCT tenant_id, user_id, keyword FROM changed),
    now_ AS (
        SELECT t.tenant_id, t.user_id, t.keyword,
               avg(COALESCE(e.segment_embedding, e.embedding)) AS mean, count(e.id) AS n
        FROM touched t
        LEFT JOIN event_keyword_links l USING (tenant_id, user_id, keyword)
        LEFT JOIN events e ON e.id = l.event_id
        GROUP BY t.tenant_id, t.user_id, t.keyword
    ), gone AS (
        DELETE FROM event_keywords k USING now_ n
        WHERE n.n = 0 AND (k.tenant_id, k.user_id, k.keyword) = (n.tenant_id, n.user_id, n.keyword)
    )
    INSERT INTO event_keywords (tenant_id, user_id, keyword, events, embedding)
    SELECT tenant_id, user_id, keyword, n, mean FROM now_ WHERE n > 0
    ON CONFLICT (tenant_id, user_id, keyword) DO UPDATE
        SET events = excluded.events, embedding = excluded.embedding, updated_at = now();
    RETURN NULL;
END $$"""


def upgrade() -> None:
    dim = current_dim(op.get_bind())
    op.add_column("events", sa.Column("segment_embedding", Vector(dim), nullable=True))
    op.create_table(
        "event_keywords",
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("keyword", sa.Text, nullable=False),
        sa.Column("events", sa.Integer, nullable=False),  # how many events hold it
        sa.Column("embedding", Vector(dim), nullable=True),
        sa.Column("tsv", pg.TSVECTOR,
                  sa.Computed("to_tsvector('jin_search'::regconfig, keyword)", persisted=True)),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False,
                  server_default=sa.text("now()")),
        sa.PrimaryKeyConstraint(*_OWNER, name="event_keywords_pkey"),
    )
    op.create_index("event_keywords_tsv", "event_keywords", ["tsv"], postgresql_using="gin")
    op.create_table(
        "event_keyword_links",
        sa.Column("tenant_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("keyword", sa.Text, nullable=False),
        sa.Column("event_id", pg.UUID(as_uuid=True),
                  sa.ForeignKey("events.id", ondelete="CASCADE"), nullable=False),
        sa.PrimaryKeyConstraint(*_OWNER, "event_id", name="event_keyword_links_pkey"),
    )
    op.create_index("event_keyword_links_event", "event_keyword_links", ["event_id"])
    op.execute(_REFRESH)
    for when, table in (("INSERT", "NEW"), ("DELETE", "OLD")):
        op.execute(f"""
            CREATE TRIGGER event_keywords_on_{when.lower()} AFTER {when} ON event_keyword_links
            REFERENCING {table} TABLE AS changed FOR EACH STATEMENT
            EXECUTE FUNCTION event_keywords_refresh()""")


def downgrade() -> None:
    op.drop_table("event_keyword_links")
    op.execute("DROP FUNCTION event_keywords_refresh()")
    op.drop_table("event_keywords")
    op.drop_column("events", "segment_embedding")

"""The vector dimension of a deployment, applied with Alembic's operations.

Migration 0003 applies the configured dimension on a new deployment, and `jin reindex` applies a
new one when the embedder changes to a model of another size: both go through `resize`, so the
schema is only ever changed by Alembic operations defined here under migrations/.
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa

DEFAULT_DIM = 384
MAX_HNSW_DIM = 2000  # pgvector's limit for an HNSW index on `vector`

_HNSW = (
    ("message_embeddings_hnsw", "message_embeddings"),
    ("memories_hnsw", "memories"),
)
# Event memory's vectors (0017): rows kept, vectors emptied, as facts' are. Absent before it.
_LATER_HNSW = (
    ("events_hnsw", "events"),
    ("entities_hnsw", "entities"),
)
# The keyword graph's vectors (0020): the events' segments and the keywords' means of them.
_LATER_PLAIN = (("events", "segment_embedding"), ("event_keywords", "embedding"))


def configured_dim(attributes: dict[str, Any]) -> int:
    """The dimension `jin migrate` passed in, else JIN_EMBEDDING_DIM (bare `alembic upgrade`)."""
    dim = int(attributes.get("embedding_dim") or os.environ.get("JIN_EMBEDDING_DIM") or DEFAULT_DIM)
    if not 1 <= dim <= MAX_HNSW_DIM:
        raise ValueError(f"embedding dimension {dim} is outside 1..{MAX_HNSW_DIM}")
    return dim


def current_dim(connection: sa.Connection) -> int:
    dim: int = connection.execute(sa.text(
        "SELECT atttypmod FROM pg_attribute "
        "WHERE attrelid = 'message_embeddings'::regclass AND attname = 'embedding'"
    )).scalar_one()
    return dim


def resize(op: Any, dim: int) -> None:
    """Change the vector columns to `dim`. Vectors of the old size cannot stay: every message is
    queued again for indexing and every fact loses its vector until reindexed."""
    present = set(op.get_bind().execute(sa.text(
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = current_schema()")).scalars())
    later = tuple((index, table) for index, table in _LATER_HNSW if table in present)
    for index, _ in (*_HNSW, *later):
        op.execute(f"DROP INDEX IF EXISTS {index}")
    op.execute(  # as backfill (priority 1): live messages keep being indexed first
        "INSERT INTO recall_queue (message_id, priority) "
        "SELECT message_id, 1 FROM message_embeddings ON CONFLICT DO NOTHING"
    )
    op.execute("DELETE FROM message_embeddings")
    op.execute("UPDATE memories SET embedding = NULL, embedder = NULL")
    op.execute(f"ALTER TABLE message_embeddings ALTER COLUMN embedding TYPE vector({dim})")
    op.execute(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({dim})")
    for _, table in later:
        op.execute(f"UPDATE {table} SET embedding = NULL, embedder = NULL")
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({dim})")
    graph = "event_keywords" in present
    for table, column in _LATER_PLAIN if graph else ():
        op.execute(f"UPDATE {table} SET {column} = NULL")
        op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector({dim})")
    # Since 0008 the indexes hold only the rows of users who need them (`ann`).
    partial = set(op.get_bind().execute(sa.text(
        "SELECT table_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND column_name = 'ann'")).scalars())
    for index, table in (*_HNSW, *later):
        where = " WHERE ann" if table in partial else ""
        op.execute(f"CREATE INDEX {index} ON {table} USING hnsw (embedding vector_cosine_ops)"
                   f"{where}")

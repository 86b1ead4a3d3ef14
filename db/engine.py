"""The engine: one per process, its pool the only one, its connections set up alike.

Every connection speaks pgvector's binary format (once the schema has the type), decodes jsonb
with orjson, plans prepared statements once (`force_generic_plan`) and lets an HNSW scan go on
past rows that a filter drops (`hnsw.iterative_scan`). A statement that must be planned for its
parameters says so itself (memory/recall_store.py).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from sqlalchemy import event, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

POOL_RECYCLE = 1800  # seconds: a connection older than this is made anew

SERVER_SETTINGS = {
    # Every statement here is hand-written and keyed on indexed columns, so the generic plan of a
    # prepared statement is the right one; planning it again on each step (what `auto` does for
    # the window query) cost more than executing it (bench/README.md).
    "plan_cache_mode": "force_generic_plan",
    # pgvector 0.8: an HNSW scan filtered by owner goes on until it has its rows, so that the
    # filter cannot starve it (bench/README.md, recall at scale).
    "hnsw.iterative_scan": "relaxed_order",
}


def async_url(url: str) -> str:
    """Any Postgres URL -> the asyncpg flavour SQLAlchemy wants."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed.render_as_string(hide_password=False)


def create_engine(url: str, *, pool_size: int = 20) -> AsyncEngine:
    """The engine; up to twice `pool_size` connections, all kept once opened."""
    engine = create_async_engine(
        async_url(url),
        # (As pool plus overflow, the overflow ones were closed on return: under load each step
        # opened a connection, and prepared its statements on it, again.)
        pool_size=2 * pool_size,
        max_overflow=0,
        # The connection given back last is the next one out: under a light load the same few
        # serve, their statements prepared and planned already (a pool's FIFO order walks all
        # of them, each preparing every statement once more).
        pool_use_lifo=True,
        pool_recycle=POOL_RECYCLE,
        # Errors name the statement but never its parameters: they hold message text and keys.
        hide_parameters=True,
        json_deserializer=_loads,
        connect_args={
            "server_settings": SERVER_SETTINGS,
            # A database host that drops packets must not hold a request for asyncpg's 60 s.
            "timeout": 10,
        },
    )
    event.listen(engine.sync_engine, "do_connect", _connect)
    event.listen(engine.sync_engine, "connect", _register_vector)
    event.listen(engine.sync_engine, "checkout", _closed_by_server)
    return engine


def _connect(dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]) -> Any:
    """Open a connection; one that cannot be opened (socket gone, refused, timed out: Postgres
    stopped or restarting) fails with a bare OSError, which SQLAlchemy passes on unwrapped. As the
    driver's OperationalError it becomes SQLAlchemy's, like every other outage: the API answers
    503 database_unavailable rather than 500."""
    try:
        return dialect.connect(*cargs, **cparams)
    except (OSError, TimeoutError) as exc:
        raise dialect.loaded_dbapi.OperationalError(
            f"cannot connect: {type(exc).__name__}: {exc}", exc) from exc


def _register_vector(dbapi_connection: Any, _: Any) -> None:
    """vector parameters and columns in pgvector's binary format: a step hands its user
    message's vector over as 1.5 KB of bytes (as a list of floats for `real[]`, asyncpg took
    ~0.1 ms to encode it)."""
    from pgvector.asyncpg import register_vector

    try:
        dbapi_connection.run_async(register_vector)
    except ValueError as exc:  # a database before the migrations (or none of jin's)
        if not str(exc).startswith("unknown type"):
            raise


def _closed_by_server(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """A pooled connection that the server closed while it sat idle (a restart, a terminated
    backend) is known to asyncpg as closed: the pool makes another in its place (SQLAlchemy's
    way: a checkout hook raising DisconnectionError), rather than fail a request with it. One
    whose close asyncpg has not seen yet is replaced at its first statement (db/statements.py);
    one the server dropped silently is found out by its next statement."""
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("the server closed this connection")


_LONG_NUMBER = re.compile(r"\d{19}")


def _loads(text: str) -> Any:
    """jsonb as Python values, as json.loads gives them, in a fraction of its time (a window
    decodes two jsonb columns a row, ~100 rows a step). orjson reads an integer past 64 bits as
    a float, so a text with a run of 19 digits takes the exact path."""
    if text == "{}":  # most rows' meta
        return {}
    if _LONG_NUMBER.search(text) is not None:
        return json.loads(text)
    return orjson.loads(text)

"""The database: the embedded Postgres when none is configured, URLs, engine and migrations."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import event, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from chat.connections import hold_connections

log = logging.getLogger("jin.database")

EMBEDDED_DB = "jin"
POOL_RECYCLE = 1800  # seconds: a connection older than this is made anew


def async_url(url: str) -> str:
    """Any Postgres URL -> the asyncpg flavour SQLAlchemy wants."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed.render_as_string(hide_password=False)


@dataclass(frozen=True)
class EmbeddedPostgres:
    url: str
    stop: Callable[[], None]


def start_embedded(data_dir: Path, *, cleanup_mode: str | None = "stop") -> EmbeddedPostgres:
    """Start (or reuse) the embedded PostgreSQL with pgvector, on a unix socket in the data dir.

    `stop()` stops it unless another live process still uses it. uvicorn re-raises SIGINT and
    SIGTERM after its shutdown, so pgserver's own atexit hook never runs under `jin serve`: the
    app's lifespan calls `stop()` instead.
    """
    import pgserver  # imported here: only the embedded mode needs it

    data_dir.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(data_dir / "pg", cleanup_mode=cleanup_mode)
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{EMBEDDED_DB}';")
    if "(0 rows)" in exists:
        server.psql(f"CREATE DATABASE {EMBEDDED_DB};")
    base = make_url(server.get_uri())
    log.info("embedded PostgreSQL running in %s", data_dir / "pg")

    def stop() -> None:
        users = server.global_process_id_list  # pids of the processes that use this server
        for pid in users.get():
            if pid != os.getpid() and not pid_alive(pid):
                users.get_and_remove(pid)  # a user that was killed never said goodbye
        server.cleanup()

    url = base.set(database=EMBEDDED_DB).render_as_string(hide_password=False)
    return EmbeddedPostgres(url, stop)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


def create_engine(
    url: str, *, pool_size: int = 20, server_settings: dict[str, str] | None = None
) -> AsyncEngine:
    """The engine, its connections speaking pgvector's binary format once the schema has the
    type (a step hands its user message's vector over as 1.5 KB of bytes: as a list of floats
    for `real[]`, asyncpg took ~0.1 ms to encode it)."""
    engine = create_async_engine(
        async_url(url),
        # Up to twice `pool_size` connections, all kept once opened. (As pool plus overflow,
        # the overflow ones were closed on return: under load each step opened a connection,
        # and prepared its statements on it, again.)
        pool_size=2 * pool_size,
        max_overflow=0,
        pool_recycle=POOL_RECYCLE,
        # Errors name the statement but never its parameters: they hold message text and keys.
        hide_parameters=True,
        json_deserializer=_loads,
        # Every statement here is hand-written and keyed on indexed columns, so the generic plan
        # of a prepared statement is the right one; planning it again on each step (what `auto`
        # does for the window query) cost more than executing it (bench/README.md).
        connect_args={
            "server_settings": server_settings or {"plan_cache_mode": "force_generic_plan"},
            # A database host that drops packets must not hold a request for asyncpg's 60 s.
            "timeout": 10,
        },
    )
    event.listen(engine.sync_engine, "do_connect", _connect)
    event.listen(engine.sync_engine, "connect", _register_vector)
    # chat.tables.checkout keeps idle connections out of the pool between uses, up to half.
    hold_connections(engine, recycle=POOL_RECYCLE)
    return engine


def _register_vector(dbapi_connection: Any, _: Any) -> None:
    from pgvector.asyncpg import register_vector

    try:
        dbapi_connection.run_async(register_vector)
    except ValueError as exc:  # a database before the migrations (or none of jin's)
        if not str(exc).startswith("unknown type"):
            raise


def create_memory_engine(
    url: str, *, pool_size: int = 5, generic_plans: bool = False
) -> AsyncEngine:
    """An engine for memory: pgvector 0.8's iterative scan on, so that an owner filter cannot
    starve an HNSW scan. Without `generic_plans`, each statement is planned for its own
    parameters, so Postgres sees how many rows the user owns: the HNSW index for a large owner,
    the owner index and an exact scan for a small one (recall of a user who may be in the
    index). With `generic_plans`, for statements whose plan does not depend on their parameters
    (recall of a user known to be small, memory/search.py; the indexer; the fact store): planned
    once per connection, not on every call."""
    return create_engine(url, pool_size=pool_size, server_settings={
        "plan_cache_mode": "force_generic_plan" if generic_plans else "force_custom_plan",
        "hnsw.iterative_scan": "relaxed_order",
    })


def _alembic_config(url: str):  # noqa: ANN202 - alembic.config.Config
    from alembic.config import Config

    import migrations

    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.set_main_option("sqlalchemy.url", async_url(url).replace("%", "%%"))
    return config


def migrate(url: str, revision: str = "head", *, embedding_dim: int | None = None) -> None:
    """`alembic upgrade` to a revision. Synchronous: call it before the event loop starts.
    `embedding_dim` is the deployment's vector dimension (migration 0003 applies it)."""
    from alembic import command

    config = _alembic_config(url)
    if embedding_dim is not None:
        config.attributes["embedding_dim"] = embedding_dim
    command.upgrade(config, revision)


def downgrade(url: str, revision: str = "base") -> None:
    from alembic import command

    command.downgrade(_alembic_config(url), revision)


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    import migrations

    script = ScriptDirectory(str(Path(migrations.__file__).parent))
    return script.get_current_head() or ""

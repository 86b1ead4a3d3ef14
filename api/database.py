"""The database's deployment: the embedded Postgres when none is configured, and migrations.
The engine and everything that runs statements is the database seam's (db/)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from alembic.config import Config
from sqlalchemy import make_url

from db.engine import async_url

log = logging.getLogger("jin.database")

EMBEDDED_DB = "jin"


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
    server = pgserver.get_server(  # type: ignore[attr-defined]
        data_dir / "pg", cleanup_mode=cleanup_mode)
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


def _alembic_config(url: str) -> Config:

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

"""Column lists and row -> dataclass mapping. The schema itself is created by migrations/ only."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import Any

import asyncpg
import asyncpg.exceptions._base as asyncpg_client_errors
import orjson
from sqlalchemy import TextClause
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from chat.connections import HeldConnections, held_for
from chat.outage import DISCONNECTED
from chat.types import Chat, Message, ModelSettings, StepRecord, built

CHAT_COLUMNS = (
    "id, tenant_id, user_id, title, system_prompt, settings, busy_policy, created_at, updated_at, "
    "token_total, compaction"
)
MESSAGE_COLUMNS = (
    "id, chat_id, position, kind, content, reasoning, status, token_count, usage, step_id, "
    "idempotency_key, meta, created_at, tokens_after"
)
STEP_COLUMNS = (
    "id, chat_id, status, user_message_id, assistant_message_id, idempotency_key, error_code, "
    "timings, created_at, finished_at"
)


def json_text(value: Any) -> str:
    """A value as the text of a jsonb parameter: by orjson (a step's timings in 0.4 us, 4.4 by
    the standard library), by json.dumps what orjson refuses (an integer past 64 bits, a key
    that is not a string)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value)


def _json(value: Any) -> Any:
    if value == "{}":  # most rows' meta: skip the decoder (a window reads ~100 rows a step)
        return {}
    return json.loads(value) if isinstance(value, str) else value


def settings_from_json(value: Any) -> ModelSettings:
    data = _json(value) or {}
    known = ModelSettings.__dataclass_fields__
    return ModelSettings(**{k: v for k, v in data.items() if k in known})


def chat_from_row(row: Mapping[str, Any]) -> Chat:
    return Chat(
        id=row["id"],
        tenant_id=row["tenant_id"],
        user_id=row["user_id"],
        title=row["title"],
        system_prompt=row["system_prompt"],
        settings=settings_from_json(row["settings"]),
        busy_policy=row["busy_policy"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        token_total=row["token_total"],
        compaction=_json(row["compaction"]) or {},
    )


def message_from_row(row: Mapping[str, Any]) -> Message:
    return built(
        Message,
        id=row["id"],
        chat_id=row["chat_id"],
        position=row["position"],
        kind=row["kind"],
        content=row["content"],
        reasoning=row["reasoning"],
        status=row["status"],
        token_count=row["token_count"],
        usage=_json(row["usage"]),
        step_id=row["step_id"],
        idempotency_key=row["idempotency_key"],
        meta=_json(row["meta"]) or {},
        created_at=row["created_at"],
        tokens_after=row["tokens_after"],
    )


def step_from_row(row: Mapping[str, Any]) -> StepRecord:
    return StepRecord(
        id=row["id"],
        chat_id=row["chat_id"],
        status=row["status"],
        user_message_id=row["user_message_id"],
        assistant_message_id=row["assistant_message_id"],
        idempotency_key=row["idempotency_key"],
        error_code=row["error_code"],
        timings=_json(row["timings"]) or {},
        created_at=row["created_at"],
        finished_at=row["finished_at"],
    )


_POSITIONAL: dict[str, tuple[str, list[str]]] = {}
_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


def positional(sql: str) -> tuple[str, list[str]]:
    """A `:name` statement as asyncpg's `$1..$n`, and the names in order (cached)."""
    if sql not in _POSITIONAL:
        names: list[str] = []

        def number(match: re.Match[str]) -> str:
            if match.group(1) not in names:
                names.append(match.group(1))
            return f"${names.index(match.group(1)) + 1}"

        _POSITIONAL[sql] = (_NAMED.sub(number, sql), names)
    return _POSITIONAL[sql]


class Driver:
    """A pooled connection's asyncpg driver, checked out of the engine's pool without
    SQLAlchemy's Connection around it (chat.tables.checkout)."""

    def __init__(self, pooled: Any, held: HeldConnections | None = None) -> None:
        self.pooled, self._held = pooled, held
        self.raw: asyncpg.Connection = pooled.driver_connection

    def invalidate(self, exc: BaseException) -> None:
        if self.pooled.is_valid:  # (fetch may have done it already)
            self.pooled.invalidate(exc)
            # The server went away: the idle ones are gone too. (Not for a value asyncpg could
            # not encode, an InterfaceError too, which says nothing of the connections.)
            if (self._held is not None and isinstance(exc, DISCONNECTED)
                    and not isinstance(exc, asyncpg_client_errors.DataError)):
                self._held.drop_idle()


def checkout(engine: AsyncEngine) -> _Checkout:
    """A connection for statements run by `fetch` alone, in autocommit (asyncpg's own way):
    the engine's pool, limits and connect hook, without SQLAlchemy's Connection, which costs a
    step ~90 us a use (three greenlets, each mapping a frame stack), and, for an engine that
    keeps its connections (chat/connections.py), without the pool's own checkout either. A
    connection that cannot be made fails as SQLAlchemy's error, like one made through
    engine.connect()."""
    return _Checkout(engine)


class _Checkout:
    __slots__ = ("_driver", "_engine", "_held")

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._held = held_for(engine)

    async def __aenter__(self) -> Driver:
        engine = self._engine
        dbapi = engine.dialect.loaded_dbapi
        try:
            pooled = await (engine.raw_connection() if self._held is None
                            else self._held.take(engine))
        except dbapi.Error as exc:
            raise DBAPIError.instance(None, None, exc, dbapi.Error) from exc
        self._driver = Driver(pooled, self._held)
        return self._driver

    async def __aexit__(self, kind: Any, exc: BaseException | None, _tb: Any) -> None:
        driver = self._driver
        # A statement cut off half-way (its task cancelled, a timeout) leaves asyncpg cancelling
        # it on the server: back in the pool, the connection would fail its next user with
        # "another operation is in progress" (a 500 seen when Postgres restarted under load).
        # So does a connection lost under asyncpg's own statements (a transaction's BEGIN or
        # ROLLBACK), which `fetch` does not see. It is closed instead; the pool opens a new one.
        if exc is not None and (
                isinstance(exc, (asyncio.CancelledError, TimeoutError, *DISCONNECTED))
                or getattr(driver.raw, "_cancellations", None)):
            driver.invalidate(exc)
        if self._held is None:
            driver.pooled.close()
        else:
            self._held.give_back(driver.pooled)


async def fetch(
    conn: AsyncConnection | Driver, statement: TextClause, params: dict[str, Any]
) -> list[Any]:
    """Run a statement on the connection's asyncpg driver: the hot statements of a step skip
    SQLAlchemy's result layer (which cost more than the query for small statements)."""
    if isinstance(conn, Driver):
        raw = conn.raw
    else:
        raw = (await conn.get_raw_connection()).driver_connection
    assert raw is not None
    sql, names = positional(statement.text)  # .text: str() would compile the clause each call
    try:
        return await raw.fetch(sql, *(params[name] for name in names))
    except DISCONNECTED as exc:  # dropped from the pool; the API answers 503 (api/problems.py)
        if isinstance(conn, Driver):
            conn.invalidate(exc)
        else:
            await conn.invalidate(exc)
        raise OperationalError(sql, None, exc, connection_invalidated=True) from exc

"""API keys in Postgres: made here, shown once, stored only as a sha256 hash.

A key is `jin_` and 43 URL-safe characters (256 random bits): too long to guess, so a fast hash
is enough and a lookup by hash is the whole check. Each key belongs to one tenant; an admin key
may also read `/metrics` and `/v1/status`.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

KEY_START = "jin_"
KEY_SHAPE = re.compile(rf"^{KEY_START}[A-Za-z0-9_-]{{43}}$")  # what create() makes
PREFIX_CHARS = 12  # `jin_` and 8 characters: enough to tell keys apart in a list, useless alone

_COLUMNS = "id, tenant_id, name, prefix, admin, created_at, last_used_at, revoked_at"


@dataclass(frozen=True)
class ApiKey:
    id: uuid.UUID
    tenant_id: str
    name: str
    prefix: str
    admin: bool
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": str(self.id), "tenant_id": self.tenant_id, "name": self.name,
            "prefix": self.prefix, "admin": self.admin,
            "created_at": self.created_at.isoformat(),
            "last_used_at": self.last_used_at.isoformat() if self.last_used_at else None,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
        }


class BadKeyRequest(Exception):
    """A caller mistake in managing keys (unknown or ambiguous key, empty tenant)."""


def hash_key(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def _key(row: Any) -> ApiKey:
    return ApiKey(**dict(row))


class KeyStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(self, tenant_id: str, name: str = "", admin: bool = False
                     ) -> tuple[ApiKey, str]:
        """A new key for the tenant: its record and the secret, which is never stored."""
        if not tenant_id.strip():
            raise BadKeyRequest("a key needs a tenant")
        secret = KEY_START + secrets.token_urlsafe(32)
        async with self.engine.begin() as conn:
            row = (await conn.execute(text(
                f"INSERT INTO api_keys (id, tenant_id, name, prefix, key_hash, admin) "
                f"VALUES (:id, :tenant, :name, :prefix, :hash, :admin) RETURNING {_COLUMNS}"),
                {"id": uuid.uuid4(), "tenant": tenant_id, "name": name,
                 "prefix": secret[:PREFIX_CHARS], "hash": hash_key(secret), "admin": admin},
            )).mappings().one()
        return _key(row), secret

    async def list(self, tenant_id: str | None = None) -> list[ApiKey]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(text(
                f"SELECT {_COLUMNS} FROM api_keys "
                "WHERE CAST(:tenant AS text) IS NULL OR tenant_id = :tenant "
                "ORDER BY tenant_id, created_at"), {"tenant": tenant_id})).mappings().all()
        return [_key(r) for r in rows]

    async def revoke(self, ident: str) -> ApiKey:
        """Revoke one key, named by its id or by its prefix (as `jin keys list` shows it)."""
        try:
            by_id: uuid.UUID | None = uuid.UUID(ident)
        except ValueError:
            by_id = None
        async with self.engine.begin() as conn:
            rows = (await conn.execute(text(
                f"SELECT {_COLUMNS} FROM api_keys WHERE id = :id OR prefix = :prefix FOR UPDATE"),
                {"id": by_id, "prefix": ident})).mappings().all()
            if not rows:
                raise BadKeyRequest(f"no key has the id or prefix {ident!r}")
            if len(rows) > 1:
                raise BadKeyRequest(f"{len(rows)} keys share the prefix {ident!r}: give the id")
            row = (await conn.execute(text(
                f"UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = :id "
                f"RETURNING {_COLUMNS}"), {"id": rows[0]["id"]})).mappings().one()
        return _key(row)

    async def verify(self, secret: str) -> ApiKey | None:
        """The live key with this secret; None for any other. Its `last_used_at` moves on at
        most once a minute, so a busy key does not make every check a write."""
        async with self.engine.begin() as conn:
            row = (await conn.execute(text(f"""
                WITH k AS (
                    SELECT {_COLUMNS} FROM api_keys
                    WHERE key_hash = :hash AND revoked_at IS NULL
                ), touched AS (
                    UPDATE api_keys SET last_used_at = now()
                    WHERE id IN (SELECT id FROM k)
                      AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
                )
                SELECT * FROM k"""), {"hash": hash_key(secret)})).mappings().first()
        return _key(row) if row else None

    async def ever_made(self) -> bool:
        """Whether any key was ever created: from then on jin is never open, even with every
        key revoked (revoking a leaked last key must not open the door)."""
        async with self.engine.connect() as conn:
            return bool((await conn.execute(text(
                "SELECT EXISTS (SELECT 1 FROM api_keys)"))).scalar())

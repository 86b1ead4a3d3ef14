"""Who is calling, and whether they may call now: Bearer keys and a per-key rate limit.

Keys are checked against Postgres and remembered for `cache_seconds`, so a revoked key stops
working within that time on every worker and a step costs no extra query. Until the first key is
made jin is open, as tenant "default", but only on a loopback address and only to callers on
loopback that no proxy forwarded: `jin serve` refuses to start otherwise. Once a key was ever
made it is never open again, even with every key revoked.
"""

from __future__ import annotations

import ipaddress
import math
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from api.keys import KEY_SHAPE, KeyStore, hash_key

OPEN_TENANT = "default"


@dataclass(frozen=True)
class Caller:
    tenant_id: str
    key_id: uuid.UUID | None  # None: open mode, no key
    admin: bool


@dataclass(frozen=True)
class Denied:
    status: int
    code: str
    detail: str


@lru_cache(maxsize=4096)  # a request asks twice (client and server); parsing cost ~5 us each
def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Access:
    """Bearer header -> Caller or Denied, with a bounded cache of answers (good and bad)."""

    def __init__(self, keys: KeyStore, *, open_allowed: bool, cache_seconds: float,
                 cache_size: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.keys, self.open_allowed = keys, open_allowed
        self.cache_seconds, self.cache_size, self.clock = cache_seconds, cache_size, clock
        # Known keys and refused ones apart, so a flood of wrong keys cannot push out good ones.
        self._known: OrderedDict[bytes, tuple[float, Caller]] = OrderedDict()
        self._refused: OrderedDict[bytes, float] = OrderedDict()
        self._open: tuple[float, bool] | None = None

    async def is_open(self) -> bool:
        """No key ever made and a loopback bind: loopback callers are let in."""
        if not self.open_allowed:
            return False
        now = self.clock()
        if self._open is None or now - self._open[0] >= self.cache_seconds:
            self._open = (now, not await self.keys.ever_made())
        return self._open[1]

    async def check(self, authorization: str | None, *, local: bool = True) -> Caller | Denied:
        """`local`: the caller is on loopback and no proxy forwarded the request."""
        if authorization is None:
            if local and await self.is_open():
                return Caller(OPEN_TENANT, None, admin=True)
            return Denied(401, "missing_key", "send `Authorization: Bearer <key>`; "
                          "an administrator makes keys with `jin keys create`")
        scheme, _, secret = authorization.strip().partition(" ")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret:
            return Denied(401, "invalid_authorization",
                          "the Authorization header must be `Bearer <key>`")
        # Anything not shaped like a key is refused without a query.
        caller = await self._lookup(secret) if KEY_SHAPE.match(secret) else None
        if caller is None:
            return Denied(401, "invalid_key", "the key is unknown or revoked")
        return caller

    async def _lookup(self, secret: str) -> Caller | None:
        digest, now = hash_key(secret), self.clock()
        known = self._known.get(digest)
        if known is not None and now - known[0] < self.cache_seconds:
            return known[1]
        refused = self._refused.get(digest)
        if refused is not None and now - refused < self.cache_seconds:
            return None
        key = await self.keys.verify(secret)
        if key is None:
            _remember(self._refused, digest, now, self.cache_size // 10)
            self._known.pop(digest, None)
            return None
        caller = Caller(key.tenant_id, key.id, key.admin)
        _remember(self._known, digest, (now, caller), self.cache_size)
        return caller


def _remember(cache: OrderedDict[bytes, Any], digest: bytes, value: Any, size: int) -> None:
    cache[digest] = value
    cache.move_to_end(digest)
    while len(cache) > size:
        cache.popitem(last=False)


class RateLimiter:
    """A token bucket per key: `burst` requests at once, refilled at `per_minute`.

    Per worker: behind a balancer over N workers a key gets up to N times the figure.
    """

    def __init__(self, per_minute: int, burst: int | None = None,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = 100_000) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(burst or per_minute)
        self.clock, self.max_keys = clock, max_keys
        self._buckets: OrderedDict[uuid.UUID, tuple[float, float]] = OrderedDict()

    def take(self, key: uuid.UUID) -> float:
        """0 when the request may go now; else the seconds until it may."""
        if self.rate <= 0:
            return 0.0
        now = self.clock()
        tokens, then = self._buckets.get(key, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - then) * self.rate)
        if tokens >= 1:
            self._buckets[key] = (tokens - 1, now)
            wait = 0.0
        else:
            self._buckets[key] = (tokens, now)
            wait = (1 - tokens) / self.rate
        self._buckets.move_to_end(key)
        if len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait

    @staticmethod
    def retry_after(wait: float) -> str:
        return str(max(1, math.ceil(wait)))

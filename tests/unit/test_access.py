"""The rate limit's arithmetic and the loopback rule, on a clock the test moves."""

from __future__ import annotations

import uuid

from api.access import RateLimiter, is_loopback


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_one_request_per_refill_interval() -> None:
    clock = Clock()
    limiter = RateLimiter(per_minute=60, burst=3, clock=clock)
    key = uuid.uuid4()
    assert [limiter.take(key) for _ in range(3)] == [0, 0, 0]
    wait = limiter.take(key)
    assert 0.99 <= wait <= 1.0  # one token a second
    clock.now += 0.5
    assert 0.49 <= limiter.take(key) <= 0.5  # refused requests do not cost tokens
    clock.now += 0.5
    assert limiter.take(key) == 0
    assert limiter.take(uuid.uuid4()) == 0  # another key has its own bucket
    clock.now += 3600
    assert [limiter.take(key) for _ in range(4)][:3] == [0, 0, 0]  # never above the burst
    assert RateLimiter.retry_after(0.2) == "1" and RateLimiter.retry_after(2.1) == "3"


def test_zero_per_minute_turns_the_limit_off() -> None:
    limiter = RateLimiter(per_minute=0)
    key = uuid.uuid4()
    assert all(limiter.take(key) == 0 for _ in range(1000))


def test_only_loopback_addresses_count_as_loopback() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.9.9.9", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "example.com", ""))

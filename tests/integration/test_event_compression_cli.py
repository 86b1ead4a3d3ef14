"""`jin memory compress --dry-run` on a real database: what the ladder would merge, of whom,
and nothing changed."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from sqlalchemy import make_url

from api.cli import main as jin


async def _sql(url: str, statement: str, *args: object) -> list[asyncpg.Record]:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(statement, *args))
    finally:
        await conn.close()


def test_a_dry_run_shows_the_merges_and_changes_nothing(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    now = datetime.now(UTC)
    week_ago = (now - timedelta(days=10)).replace(hour=12)  # weekly: within a month
    rows = [("acme", "ann", "garden", week_ago), ("acme", "ann", "garden",
                                                  week_ago + timedelta(hours=1)),
            ("acme", "ann", "chess", now - timedelta(hours=1)),  # fresh: kept in detail
            ("acme", "bob", "garden", week_ago), ("other", "ann", "garden", week_ago),
            ("other", "ann", "garden", week_ago + timedelta(minutes=5))]
    for tenant, user, topic, at in rows:
        asyncio.run(_sql(database_url, """
            INSERT INTO events (id, tenant_id, user_id, type, topic, properties, summary,
                                started_at, ended_at)
            VALUES (gen_random_uuid(), $1, $2, 'discussion', $3, '{}', $3, $4, $4)""",
                         tenant, user, topic, at))
    monkeypatch.setenv("DATABASE_URL", database_url)

    assert jin(["memory", "compress", "--dry-run", "--tenant", "acme"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["events"], report["would_merge"], report["summaries"]) == (4, 2, 1)
    [merge] = report["merges"]
    assert (merge["owner"], merge["topic"], merge["level"]) == ("acme/ann", "garden", "weekly")
    monday = week_ago.date() - timedelta(days=week_ago.weekday())
    assert merge["start"].startswith(monday.isoformat()) and len(merge["sources"]) == 2

    assert jin(["memory", "compress", "--dry-run"]) == 0  # every tenant: two merges
    assert json.loads(capsys.readouterr().out)["summaries"] == 2
    assert jin(["memory", "compress"]) == 2  # only the dry run is built
    left = asyncio.run(_sql(database_url, "SELECT count(*) AS n FROM events "
                                          "WHERE compressed_into IS NULL"))
    assert left[0]["n"] == 6

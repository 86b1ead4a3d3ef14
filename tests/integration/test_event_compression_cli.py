"""`jin memory compress` on a real database: `--dry-run` shows what the ladder would merge, of
whom, and changes nothing; without it, the summaries are written with progress shown."""

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


def test_a_dry_run_changes_nothing_and_a_run_writes_the_summaries(
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
    left = asyncio.run(_sql(database_url, "SELECT count(*) AS n FROM events "
                                          "WHERE compressed_into IS NULL"))
    assert left[0]["n"] == 6

    # Written, for one tenant: no helper server here, so the summary is the events' texts.
    monkeypatch.delenv("JIN_HELPER_URL", raising=False)
    assert jin(["memory", "compress", "--tenant", "acme"]) == 0
    out = capsys.readouterr()
    done = json.loads(out.out)
    assert (done["summaries"], done["compressed"], done["fallbacks"]) == (1, 2, 1)
    assert "[1/1] acme/ann 'garden' weekly" in out.err and "2 events merged" in out.err
    [summary] = asyncio.run(_sql(database_url, "SELECT * FROM events WHERE level IS NOT NULL"))
    assert (summary["tenant_id"], summary["user_id"], summary["level"]) == ("acme", "ann",
                                                                           "weekly")
    assert summary["summary"].startswith("garden, weekly from ")
    assert summary["embedding"] is not None  # embedded by the built-in model, for recall
    sources = asyncio.run(_sql(database_url, "SELECT compressed_into, expires_at FROM events "
                                             "WHERE id = ANY($1::uuid[])",
                               summary["source_event_ids"]))
    assert all(s["compressed_into"] == summary["id"] and s["expires_at"] for s in sources)
    assert jin(["memory", "compress", "--dry-run", "--tenant", "acme"]) == 0
    assert json.loads(capsys.readouterr().out)["summaries"] == 0  # nothing left to merge

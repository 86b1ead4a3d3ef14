"""The audit: one read-only pass that finds lost, duplicated or orphaned rows.

Run after a fault (a killed worker, a restarted database, a provider that misbehaved) to prove
that nothing was lost and nothing was written twice: `jin audit`, the fault tests and
`bench/load.py` all call `audit()`. Every check counts rows that must not exist; a clean
database has every count at zero. A step still inside a live lease is not a finding: it is
simply running.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.statements import connect, fetch, transaction

# name -> (what a finding means, a query returning the ids of the offending rows)
CHECKS: dict[str, tuple[str, str]] = {
    "step_without_user_message": (
        "lost: a step whose user message is gone",
        """SELECT s.id FROM steps s
           LEFT JOIN messages m ON m.id = s.user_message_id
           WHERE m.id IS NULL""",
    ),
    "finished_step_without_answer_row": (
        "lost: a finished step whose assistant row (answer, partial or failed) is gone",
        """SELECT s.id FROM steps s
           LEFT JOIN messages m ON m.id = s.assistant_message_id
           WHERE s.status <> 'running' AND m.id IS NULL""",
    ),
    "duplicated_turn": (
        "duplicated: a step with more than one user or assistant row",
        """SELECT step_id FROM messages
           WHERE step_id IS NOT NULL AND kind IN ('user', 'assistant')
           GROUP BY step_id, kind HAVING count(*) > 1""",
    ),
    "duplicated_idempotency_key": (
        "duplicated: two steps of one chat under one idempotency key",
        """SELECT min(id::text)::uuid FROM steps WHERE idempotency_key IS NOT NULL
           GROUP BY chat_id, idempotency_key HAVING count(*) > 1""",
    ),
    "message_of_missing_step": (
        "orphaned: a message that names a step that does not exist",
        """SELECT m.id FROM messages m
           LEFT JOIN steps s ON s.id = m.step_id
           WHERE m.step_id IS NOT NULL AND s.id IS NULL""",
    ),
    "step_in_another_chat": (
        "orphaned: a step whose messages sit in another chat",
        """SELECT s.id FROM steps s JOIN messages m
             ON m.id IN (s.user_message_id, s.assistant_message_id)
           WHERE m.chat_id <> s.chat_id""",
    ),
    "streaming_row_of_finished_step": (
        "orphaned: an answer still marked streaming though its step has ended",
        """SELECT m.id FROM messages m JOIN steps s ON s.id = m.step_id
           WHERE m.status = 'streaming' AND s.status <> 'running'""",
    ),
    "running_step_without_lease": (
        "orphaned: a step marked running that holds no live lease on its chat",
        """SELECT s.id FROM steps s JOIN chats c ON c.id = s.chat_id
           WHERE s.status = 'running'
             AND (c.lease_step_id IS DISTINCT FROM s.id OR c.lease_expires_at < now())""",
    ),
    "position_past_chat_counter": (
        "corrupt: a message placed after the chat's last position",
        """SELECT m.id FROM messages m JOIN chats c ON c.id = m.chat_id
           WHERE m.position > c.last_position""",
    ),
    "embedding_of_missing_message": (
        "orphaned: a recall vector whose message is gone",
        """SELECT e.message_id FROM message_embeddings e
           LEFT JOIN messages m ON m.id = e.message_id
           WHERE m.id IS NULL""",
    ),
}


@dataclass(frozen=True)
class Audit:
    """Counts per check (all zero when clean) and up to five offending ids of each."""

    counts: dict[str, int]
    samples: dict[str, list[str]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)  # what was looked at

    @property
    def clean(self) -> bool:
        return not any(self.counts.values())

    def findings(self) -> dict[str, str]:
        """Each failing check with its meaning and sample ids, for an assertion message."""
        return {
            name: f"{count} x {CHECKS[name][0]}: {', '.join(self.samples.get(name, []))}"
            for name, count in self.counts.items() if count
        }

    def to_json(self) -> dict[str, object]:
        return {"clean": self.clean, "counts": self.counts, "rows": self.rows,
                "findings": self.findings()}


async def audit(engine: AsyncEngine) -> Audit:
    """Run every check in one repeatable-read snapshot, so concurrent writes cannot make
    two checks disagree."""
    counts: dict[str, int] = {}
    samples: dict[str, list[str]] = {}
    async with connect(engine) as conn, transaction(
            conn, isolation="repeatable_read", readonly=True):
        for name, (_, query) in CHECKS.items():
            rows = await fetch(conn, text(
                f"SELECT count(*) OVER () AS n, x.* FROM ({query}) x LIMIT 5"), {})
            counts[name] = rows[0][0] if rows else 0
            if rows:
                samples[name] = [str(row[1]) for row in rows]
        [totals] = await fetch(conn, text(
            "SELECT (SELECT count(*) FROM chats), (SELECT count(*) FROM messages), "
            "(SELECT count(*) FROM steps)"), {})
    sizes = {"chats": totals[0], "messages": totals[1], "steps": totals[2]}
    return Audit(counts=counts, samples=samples, rows=sizes)

"""The recall benchmark's dataset: the JSON Lines format, parsed into frozen dataclasses.

A dataset is JSON Lines, one object a line:

    {"type": "turn", "conversation_id", "turn_id", "session_id", "role", "content",
     "created_at"}
    {"type": "question", "question_id", "conversation_id", "question", "asked_at",
     "evidence": [turn ids], "category": optional, "lang": optional}
    {"type": "fact", "conversation_id", "text", "sources": [turn ids], "created_at"}

A conversation is one user, a session one chat of that user. A fact (optional) is what the
memory flush would have drawn from its source turns; the benchmark writes it through the fact
store, with those turns' messages as its sources. A fact is not a turn: it is never evidence.
Timestamps are ISO-8601 with a timezone. Turn ids need be unique only within their conversation
(a dataset may reuse ids like "D1:3" across conversations). Fields not named here are ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class Turn:
    conversation_id: str
    session_id: str
    turn_id: str
    role: Role
    content: str
    created_at: datetime


@dataclass(frozen=True)
class Session:
    session_id: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    sessions: tuple[Session, ...]

    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]


@dataclass(frozen=True)
class Question:
    question_id: str
    conversation_id: str
    question: str
    asked_at: datetime
    evidence: tuple[str, ...]
    category: str | None = None
    lang: str | None = None


@dataclass(frozen=True)
class Fact:
    conversation_id: str
    text: str
    sources: tuple[str, ...]  # turn ids of its conversation
    created_at: datetime


@dataclass(frozen=True)
class Dataset:
    conversations: dict[str, Conversation]  # in the order of their first line
    questions: tuple[Question, ...]
    facts: tuple[Fact, ...] = ()


_TURN_FIELDS = ("conversation_id", "turn_id", "session_id", "role", "content", "created_at")
_QUESTION_FIELDS = ("question_id", "conversation_id", "question", "asked_at", "evidence")
_FACT_FIELDS = ("conversation_id", "text", "sources", "created_at")


def json_record(line: str, n: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"line {n}: not valid JSON ({exc.msg})") from exc
    if not isinstance(record, dict):
        raise ValueError(f"line {n}: expected a JSON object, got {type(record).__name__}")
    return record


def _fields(record: dict[str, Any], names: tuple[str, ...], n: int) -> None:
    missing = [name for name in names if name not in record]
    if missing:
        raise ValueError(f"line {n}: {record['type']} is missing {', '.join(missing)}")
    for name in names:
        if name not in ("evidence", "sources") and not isinstance(record[name], str):
            raise ValueError(f"line {n}: {name} must be a string")
    for name in ("category", "lang"):
        if record.get(name) is not None and not isinstance(record[name], str):
            raise ValueError(f"line {n}: {name} must be a string or null")


def _timestamp(value: str, name: str, n: int) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"line {n}: {name} is not an ISO-8601 timestamp: {value!r}") from exc
    if parsed.tzinfo is None:
        raise ValueError(f"line {n}: {name} has no timezone: {value!r}")
    return parsed


def parse_turn(record: dict[str, Any], n: int) -> Turn:
    """A turn line's record (line n), checked; ValueError naming the line if it is not one."""
    _fields(record, _TURN_FIELDS, n)
    if record["role"] not in ("user", "assistant"):
        raise ValueError(f"line {n}: role must be 'user' or 'assistant', got {record['role']!r}")
    return Turn(
        conversation_id=record["conversation_id"], session_id=record["session_id"],
        turn_id=record["turn_id"], role=record["role"], content=record["content"],
        created_at=_timestamp(record["created_at"], "created_at", n),
    )


def _question(record: dict[str, Any], n: int) -> Question:
    _fields(record, _QUESTION_FIELDS, n)
    evidence = record["evidence"]
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise ValueError(f"line {n}: evidence must be a list of turn ids (strings)")
    return Question(
        question_id=record["question_id"], conversation_id=record["conversation_id"],
        question=record["question"], asked_at=_timestamp(record["asked_at"], "asked_at", n),
        evidence=tuple(evidence), category=record.get("category"), lang=record.get("lang"),
    )


def _fact(record: dict[str, Any], n: int) -> Fact:
    _fields(record, _FACT_FIELDS, n)
    sources = record["sources"]
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise ValueError(f"line {n}: sources must be a list of turn ids (strings)")
    return Fact(conversation_id=record["conversation_id"], text=record["text"],
                sources=tuple(sources),
                created_at=_timestamp(record["created_at"], "created_at", n))


def _turns_of(ids: dict[str, set[str]], conversation_id: str, named: tuple[str, ...],
              what: str, n: int) -> None:
    """Line n names, as its `what`, turns that its conversation has; ValueError if not."""
    if conversation_id not in ids:
        raise ValueError(f"line {n}: conversation {conversation_id!r} has no turns")
    unknown = [t for t in named if t not in ids[conversation_id]]
    if unknown:
        raise ValueError(f"line {n}: {what} {', '.join(map(repr, unknown))} is not a turn "
                         f"of conversation {conversation_id!r}")


def _assemble(turns: list[tuple[int, Turn]], questions: list[tuple[int, Question]],
              facts: list[tuple[int, Fact]]) -> Dataset:
    sessions: dict[str, dict[str, list[Turn]]] = {}
    ids: dict[str, set[str]] = {}
    for n, turn in turns:
        known = ids.setdefault(turn.conversation_id, set())
        if turn.turn_id in known:
            raise ValueError(f"line {n}: turn {turn.turn_id!r} appears twice in conversation "
                             f"{turn.conversation_id!r}")
        known.add(turn.turn_id)
        by_session = sessions.setdefault(turn.conversation_id, {})
        by_session.setdefault(turn.session_id, []).append(turn)
    seen: set[str] = set()
    for n, question in questions:
        if question.question_id in seen:
            raise ValueError(f"line {n}: question {question.question_id!r} appears twice")
        seen.add(question.question_id)
        _turns_of(ids, question.conversation_id, question.evidence, "evidence", n)
    for n, fact in facts:
        _turns_of(ids, fact.conversation_id, fact.sources, "source", n)
    conversations = {
        cid: Conversation(cid, tuple(Session(sid, tuple(ts)) for sid, ts in by_session.items()))
        for cid, by_session in sessions.items()
    }
    return Dataset(conversations=conversations, questions=tuple(q for _, q in questions),
                   facts=tuple(f for _, f in facts))


def parse_dataset(lines: Iterable[str]) -> Dataset:
    """Turns grouped by conversation and session in file order, the questions and the facts.

    Raises ValueError naming the line for bad JSON, an unknown type, a missing or mistyped
    field, a timestamp without timezone, a repeated id, or evidence or a fact's source outside
    its conversation.
    """
    turns: list[tuple[int, Turn]] = []
    questions: list[tuple[int, Question]] = []
    facts: list[tuple[int, Fact]] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = json_record(line, n)
        kind = record.get("type")
        if kind == "turn":
            turns.append((n, parse_turn(record, n)))
        elif kind == "question":
            questions.append((n, _question(record, n)))
        elif kind == "fact":
            facts.append((n, _fact(record, n)))
        else:
            raise ValueError(f"line {n}: unknown type {kind!r} "
                             "(expected 'turn', 'question' or 'fact')")
    return _assemble(turns, questions, facts)


def load_dataset(path: str | Path) -> Dataset:
    with open(path, encoding="utf-8") as f:
        return parse_dataset(f)

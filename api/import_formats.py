"""The files `jin import` reads, parsed into conversations (chat/importer.py). Pure.

Three formats, told apart by their first line unless named (`--format`):

- `jin`: jin's own JSON Lines, the dataset of `jin bench recall` (memory/evaluation/dataset.py):
  each `turn` line is a message, each session of a conversation a chat; `question` and `fact`
  lines are the benchmark's and are passed over.
- `chatgpt`: a ChatGPT data export's `conversations.json`, one JSON array; a conversation is a
  tree of `mapping` nodes, of which the branch that ends at `current_node` is the one the person
  saw last.
- `openai`: one conversation a line, `{"messages": [{"role", "content"}, ...]}` (with an
  optional `id`, `title`, `created_at`) or the bare list.

A line (a conversation, for the export) that cannot be read is reported with its line number
and the rest goes on. Every conversation and message gets an external id that is the same each
time the file is read: its own id when the source has one, else one derived from its content
and place, so a second import of the file writes nothing new.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from chat.importer import ImportedConversation, ImportedTurn
from chat.types import MessageKind
from memory.evaluation.dataset import json_record, parse_turn

Format = Literal["jin", "chatgpt", "openai"]
FORMATS: tuple[Format, ...] = ("jin", "chatgpt", "openai")
TITLE_CHARS = 80


@dataclass(frozen=True)
class BadLine:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


Parsed = ImportedConversation | BadLine


def detect(text: str) -> Format:
    """The format of a file's text, from its first non-blank characters."""
    head = text.lstrip()
    if head.startswith("["):
        # A JSON array over the whole file is an export; a line that is a bare list of
        # messages is the OpenAI format.
        first = head.split("\n", 1)[0].rstrip()
        try:
            json.loads(first)
        except json.JSONDecodeError:
            return "chatgpt"
        return "chatgpt" if first.startswith("[{") and '"mapping"' in first else "openai"
    first_line = head.split("\n", 1)[0]
    return "jin" if '"type"' in first_line and '"messages"' not in first_line else "openai"


def parse(text: str, fmt: Format, now: datetime) -> Iterator[Parsed]:
    """The conversations of a file's text, and the lines that could not be read, in file order
    (a jin file's conversations come after its last line: a session may span the file).
    `now` stamps messages that carry no time of their own."""
    if fmt == "jin":
        return _jin(text)
    if fmt == "chatgpt":
        return _chatgpt(text, now)
    return _openai(text, now)


def jin_session_id(conversation_id: str, session_id: str) -> str:
    """A jin JSONL session's external id (`jin bench recall` writes its sessions by it too)."""
    return f"jin:{conversation_id}/{session_id}"


def _jin(text: str) -> Iterator[Parsed]:
    sessions: dict[tuple[str, str], list[ImportedTurn]] = {}
    starts: dict[tuple[str, str], int] = {}
    seen: dict[tuple[str, str], set[str]] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json_record(line, n)
            if record.get("type") in ("question", "fact"):
                continue
            if record.get("type") != "turn":
                raise ValueError(f"line {n}: unknown type {record.get('type')!r}")
            turn = parse_turn(record, n)
        except ValueError as exc:
            yield BadLine(n, str(exc).removeprefix(f"line {n}: "))
            continue
        key = (turn.conversation_id, turn.session_id)
        if turn.turn_id in seen.setdefault(key, set()):
            yield BadLine(n, f"turn {turn.turn_id!r} appears twice in session {key[1]!r}")
            continue
        seen[key].add(turn.turn_id)
        starts.setdefault(key, n)
        sessions.setdefault(key, []).append(ImportedTurn(
            turn.turn_id, turn.role, turn.content, turn.created_at))
    for (conversation, session), turns in sessions.items():
        yield ImportedConversation(
            external_id=jin_session_id(conversation, session), title=session,
            created_at=min(t.created_at for t in turns), turns=tuple(turns),
            line=starts[(conversation, session)])


def _elements(text: str) -> Iterator[tuple[int, Any] | BadLine]:
    """The elements of a JSON array, each with the line it starts on. A broken element ends
    the reading: where the next one starts cannot be known."""
    decoder = json.JSONDecoder()
    at = len(text) - len(text.lstrip())
    if not text.startswith("[", at):
        yield BadLine(1, "a ChatGPT export is one JSON array of conversations")
        return
    at += 1
    while True:
        while at < len(text) and text[at] in " \t\r\n,":
            at += 1
        if at >= len(text) or text[at] == "]":
            return
        line = text.count("\n", 0, at) + 1
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            yield BadLine(text.count("\n", 0, exc.pos) + 1, f"not valid JSON ({exc.msg}); "
                          "the rest of the file is not read")
            return
        yield line, value


def _chatgpt(text: str, now: datetime) -> Iterator[Parsed]:
    for element in _elements(text):
        if isinstance(element, BadLine):
            yield element
            continue
        line, value = element
        try:
            yield _export_conversation(value, line, now)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            yield BadLine(line, f"conversation not read: {_reason(exc)}")


def _reason(exc: Exception) -> str:
    return f"missing {exc}" if isinstance(exc, KeyError) else str(exc)


def _export_conversation(value: Any, line: int, now: datetime) -> ImportedConversation:
    if not isinstance(value, dict):
        raise ValueError(f"expected an object, got {type(value).__name__}")
    mapping = value["mapping"]
    if not isinstance(mapping, dict):
        raise ValueError("mapping must be an object")
    conversation_id = str(value.get("conversation_id") or value.get("id") or "")
    if not conversation_id:
        raise ValueError("no id")
    started = _time(value.get("create_time"), now)
    # The branch the person saw last: from current_node up to the root.
    node_id = value.get("current_node")
    if node_id is None:  # an export without it: the newest leaf
        leaves = [k for k, node in mapping.items() if not node.get("children")]
        node_id = leaves[-1] if leaves else None
    branch: list[dict[str, Any]] = []
    seen: set[str] = set()
    while node_id is not None and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        branch.append(node)
        node_id = node.get("parent")
    turns: list[ImportedTurn] = []
    last = started
    for node in reversed(branch):
        message = node.get("message")
        if not isinstance(message, dict):
            continue
        role = (message.get("author") or {}).get("role")
        content = _export_text(message.get("content"))
        if role not in ("user", "assistant") or not content:
            continue  # system notes, tool output, images: nothing a person said or read
        last = _time(message.get("create_time"), last)
        turns.append(ImportedTurn(str(message.get("id") or node.get("id")),
                                  role, content, last))
    if not turns:
        raise ValueError("no message with text")
    title = str(value.get("title") or "") or _title(turns)
    return ImportedConversation(f"chatgpt:{conversation_id}", title, started, tuple(turns),
                                line)


def _export_text(content: Any) -> str:
    if not isinstance(content, dict):
        return ""
    if content.get("content_type") in ("text", "multimodal_text"):
        parts = content.get("parts") or []
        return "\n".join(p for p in parts if isinstance(p, str) and p).strip()
    if content.get("content_type") == "code" and isinstance(content.get("text"), str):
        return str(content["text"]).strip()
    return ""


def _time(value: Any, default: datetime) -> datetime:
    """A time as the sources write it: seconds since the epoch, or ISO-8601 (UTC unless it
    says otherwise); `default` when there is none."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError(f"not a time: {value!r}") from exc
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise ValueError(f"not a time: {value!r}")


_ROLES: dict[str, MessageKind] = {"user": "user", "assistant": "assistant",
                                  "system": "system", "developer": "system"}


def _openai(text: str, now: datetime) -> Iterator[Parsed]:
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield _openai_line(line, n, now)
        except (ValueError, TypeError, AttributeError) as exc:
            yield BadLine(n, str(exc))


def _openai_line(line: str, n: int, now: datetime) -> ImportedConversation:
    try:
        record: Any = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg})") from exc
    if isinstance(record, list):
        record = {"messages": record}
    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
        raise ValueError('expected {"messages": [...]} or a list of messages')
    started = _time(record.get("created_at") or record.get("create_time"), now)
    turns: list[ImportedTurn] = []
    for i, message in enumerate(record["messages"]):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValueError(f"message {i} has no role")
        kind = _ROLES.get(message["role"])
        content = _message_text(message.get("content"), i)
        if kind is None or not content:
            continue  # tool calls and their results: no text a person said or read
        at = _time(message.get("created_at") or message.get("timestamp"), started)
        turns.append(ImportedTurn(str(i), kind, content, at))
    if not turns:
        raise ValueError("no message with text")
    # The same line gives the same id: its own, or a digest of its messages.
    own = record.get("id") or record.get("conversation_id")
    external = f"openai:{own}" if own else "openai:sha256:" + hashlib.sha256(
        json.dumps(record["messages"], sort_keys=True).encode()).hexdigest()[:32]
    title = str(record.get("title") or "") or _title(turns)
    return ImportedConversation(external, title, started, tuple(turns), n)


def _message_text(content: Any, i: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):  # content parts: the text ones
        return "\n".join(p["text"] for p in content if isinstance(p, dict)
                         and p.get("type") == "text" and isinstance(p.get("text"), str)).strip()
    raise ValueError(f"message {i}: content must be a string or a list of parts")


def _title(turns: list[ImportedTurn]) -> str:
    first = next((t.content for t in turns if t.kind == "user"), "")
    line = " ".join(first.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"

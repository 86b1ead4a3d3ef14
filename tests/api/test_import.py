"""`jin import` end to end: the command writes and indexes a file, and the running jin lists the
chats, pages their history with its own times, and recalls what was said in them."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.cli import main
from llm.testing import FakeOpenAIServer, Reply
from tests.api.sse_client import history, new_chat, stream_step

EXPORT = [
    {"id": "conv-gym", "title": "Gym", "create_time": 1_717_200_000, "current_node": "a",
     "mapping": {
         "u": {"id": "u", "parent": None, "children": ["a"], "message": {
             "id": "u", "author": {"role": "user"}, "create_time": 1_717_200_000,
             "content": {"content_type": "text",
                         "parts": ["My locker code at the north gym is LCK-4242"]}}},
         "a": {"id": "a", "parent": "u", "children": [], "message": {
             "id": "a", "author": {"role": "assistant"}, "create_time": 1_717_200_060,
             "content": {"content_type": "text", "parts": ["Noted."]}}},
     }},
]


@pytest.fixture
def jin_env(monkeypatch: pytest.MonkeyPatch, database_url: str, model_url: str) -> None:
    """`jin import` configured as the test's jin: its database, the fake embedder."""
    for name, value in {
        "JIN_DATABASE_URL": database_url, "JIN_EMBEDDER_URL": model_url,
        "JIN_EMBEDDER_MODEL": "fake-embedder", "JIN_IMPORT_NICE": "0",
    }.items():
        monkeypatch.setenv(name, value)


async def _import(path: Path, *args: str) -> int:
    return await asyncio.to_thread(main, ["import", str(path), "--user", "ana", *args])


async def test_imported_chats_are_listed_scrollable_and_recalled(
    client: httpx.AsyncClient, model: FakeOpenAIServer, engine: AsyncEngine, jin_env: None,
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(EXPORT))
    assert await _import(export) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "chatgpt"
    assert (report["chats_created"], report["messages_written"]) == (1, 2)
    async with engine.connect() as conn:  # indexed when the command ends: nothing waits
        assert (await conn.execute(text("SELECT count(*) FROM recall_queue"))).scalar() == 0

    [chat] = (await client.get("/v1/chats", params={"user_id": "ana"})).json()["chats"]
    assert chat["title"] == "Gym" and chat["created_at"].startswith("2024-06-01T00:00:00")
    rows = await history(client, chat["id"])
    assert [(r["kind"], r["content"], r["created_at"][:19]) for r in rows] == [
        ("user", "My locker code at the north gym is LCK-4242", "2024-06-01T00:00:00"),
        ("assistant", "Noted.", "2024-06-01T00:01:00"),
    ]

    # A new chat of the user recalls what was said in the imported one.
    fresh = await new_chat(client, user_id="ana")
    model.push(Reply(["It is LCK-4242."]))
    events = await stream_step(client, fresh, "what is my locker code at the north gym?")
    [context] = [data for event, data in events if event == "context"]
    recalled = {r["text"]: r for r in context["recalled"]}
    assert recalled["My locker code at the north gym is LCK-4242"]["chat_id"] == chat["id"]

    # The same file again: nothing new, and the chat's history is as it was.
    assert await _import(export) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["chats_created"], again["messages_written"]) == (0, 0)
    assert len((await client.get("/v1/chats", params={"user_id": "ana"})).json()["chats"]) == 2
    assert await history(client, chat["id"]) == rows


async def test_bad_lines_are_reported_by_number_and_the_rest_imported(
    client: httpx.AsyncClient, jin_env: None, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = tmp_path / "chats.jsonl"
    lines.write_text("\n".join([
        json.dumps({"messages": [{"role": "user", "content": "first"}]}),
        "{broken",
        json.dumps({"messages": [{"role": "user", "content": "third"}]}),
    ]) + "\n")
    assert await _import(lines, "--no-index") == 1  # something was not imported: say so
    captured = capsys.readouterr()
    assert f"{lines}: line 2: not valid JSON" in captured.err
    assert json.loads(captured.out)["messages_written"] == 2
    chats = (await client.get("/v1/chats", params={"user_id": "ana"})).json()["chats"]
    assert sorted(c["title"] for c in chats) == ["first", "third"]


async def test_the_command_prints_its_work_not_the_migration_tool_s_plugins(
    client: httpx.AsyncClient, database_url: str, model_url: str, tmp_path: Path,
) -> None:
    """A new user at a terminal: `jin import` (it migrates first) says what it did, without the
    dozen lines Alembic logs as it loads its plugins."""
    lines = tmp_path / "chats.jsonl"
    lines.write_text(json.dumps({"messages": [{"role": "user", "content": "hello"}]}) + "\n")
    env = {**os.environ, "JIN_DATABASE_URL": database_url, "JIN_EMBEDDER_URL": model_url,
           "JIN_EMBEDDER_MODEL": "fake-embedder", "JIN_IMPORT_NICE": "0"}
    done = await asyncio.to_thread(
        subprocess.run, [str(Path(sys.executable).with_name("jin")), "import", str(lines),
                         "--user", "bo", "--no-index"],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["messages_written"] == 1
    assert "plugin" not in done.stderr


def test_a_command_on_the_embedded_database_does_not_print_its_start_and_stop() -> None:
    """A new user's first command, with no database configured: the embedded Postgres starts
    and stops around it without a screen of pg_ctl command lines."""
    data = Path(tempfile.mkdtemp(prefix="jin-cli-pg-"))
    data.chmod(0o755)  # as root, pgserver runs Postgres as a user of its own
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "JIN_DATABASE_URL")}
    try:
        done = subprocess.run(
            [str(Path(sys.executable).with_name("jin")), "migrate"],
            env={**env, "JIN_DATA_DIR": str(data)}, capture_output=True, text=True, timeout=180)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    assert "embedded PostgreSQL running" in done.stderr
    assert "pgserver" not in done.stderr and "pg_ctl" not in done.stderr, done.stderr


async def test_ctrl_c_stops_the_import_with_a_word_and_the_same_command_goes_on(
    engine: AsyncEngine, database_url: str, model_url: str,
    tmp_path: Path,
) -> None:
    """Ctrl-C while `jin import` indexes: one line saying how to go on, no traceback; the same
    command then indexes the rest, without waiting on what the stopped run had claimed."""
    lines = tmp_path / "chats.jsonl"
    lines.write_text("".join(json.dumps({"id": f"c{i}", "messages": [
        {"role": "user", "content": f"question {i} about the garden"},
        {"role": "assistant", "content": f"answer {i} about the roses"}]}) + "\n"
        for i in range(150)))
    env = {**os.environ, "JIN_DATABASE_URL": database_url, "JIN_EMBEDDER_URL": model_url,
           "JIN_EMBEDDER_MODEL": "fake-embedder", "JIN_IMPORT_NICE": "0",
           "JIN_INDEXER_BATCH_SIZE": "1"}  # 300 embedder calls: time to be stopped
    command = [str(Path(sys.executable).with_name("jin")), "import", str(lines), "--user", "cy"]

    def stopped() -> tuple[int, str]:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # the progress: a line per 10% off a terminal
            seen.append(line)
            if line.startswith("indexing: ") and "(0%)" not in line:
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.communicate(timeout=60)[1]
        return proc.returncode, "".join(seen) + rest

    code, err = await asyncio.to_thread(stopped)
    assert code == 130, err
    assert "run the same command again" in err and "Traceback" not in err
    async with engine.connect() as conn:
        left = (await conn.execute(text("SELECT count(*) FROM recall_queue"))).scalar_one()
    assert 0 < left < 300
    done = await asyncio.to_thread(subprocess.run, command, env=env, capture_output=True,
                                   text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["messages_written"], report["messages_already_there"]) == (0, 300)
    assert report["indexed"] == left and "waiting" not in done.stderr
    async with engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM recall_queue"))).scalar_one() == 0

"""`jin chat` as a person meets it: the real command in a process of its own, typing into its
stdin, against a running jin and the fake model."""

from __future__ import annotations

import http.server
import json
import os
import platform
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from llm.testing import FakeOpenAIServer, Reply
from tests.api.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
READ_SYSCALL = {"x86_64": "0", "aarch64": "63"}.get(platform.machine(), "0")


def chat_env(jin: str | None = None, **extra: str) -> dict[str, str]:
    """This process's environment, minus any JIN_ setting, pointed at `jin` by host and port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JIN_")}
    if jin is not None:
        parts = urlsplit(jin)
        env |= {"JIN_HOST": str(parts.hostname), "JIN_PORT": str(parts.port)}
    return env | {"NO_COLOR": "1", "PYTHONUNBUFFERED": "1", **extra}


def run_chat(env: dict[str, str], typed: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "api.cli", "chat", *args], input=typed, env=env, cwd=ROOT,
        capture_output=True, text=True, timeout=60,
    )


def shown(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines a person would read; typed input is not echoed through a pipe, so the prompt
    shares its line with what follows it."""
    return result.stdout.replace("you> ", "").splitlines()


def chats_of(jin: str, user: str = "terminal-user") -> list[dict]:
    response = httpx.get(f"{jin}/v1/chats", params={"user_id": user})
    assert response.status_code == 200, response.text
    return response.json()["chats"]


def messages_of(jin: str, chat_id: str) -> list[dict]:
    response = httpx.get(f"{jin}/v1/chats/{chat_id}/messages")
    assert response.status_code == 200, response.text
    return response.json()["messages"]


def test_follows_jin_host_and_port_and_labels_reasoning_apart(
    jin: str, model: FakeOpenAIServer
) -> None:
    model.push(Reply(["Hello ", "there"], reasoning=["let me ", "think"]))

    result = run_chat(chat_env(jin), "hi, I am Ann\n")

    assert result.returncode == 0, result.stderr
    lines = shown(result)
    assert "thinking: let me think" in lines
    assert "jin> Hello there" in lines
    assert lines.index("thinking: let me think") < lines.index("jin> Hello there")
    assert "HTTP Request" not in result.stderr  # httpx's line per request stays quiet
    # The chat was made with the first message, named after it.
    [chat] = chats_of(jin)
    assert chat["title"] == "hi, I am Ann"
    assert [(m["kind"], m["content"]) for m in messages_of(jin, chat["id"])] == [
        ("user", "hi, I am Ann"), ("assistant", "Hello there")]


def test_nothing_listening_is_one_line() -> None:
    port = free_port()  # bound and released: nothing listens there now

    result = run_chat(chat_env(JIN_HOST="127.0.0.1", JIN_PORT=str(port)), "hi\n")

    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"jin chat: nothing answers at http://127.0.0.1:{port} - start it with `make run`")
    assert "Traceback" not in result.stdout + result.stderr


def test_problems_are_one_readable_line(jin_factory: Callable[..., str]) -> None:
    jin = jin_factory(max_message_chars=20)
    missing = uuid.uuid4()

    result = run_chat(chat_env(jin), "this message is far too long for the limit\n",
                      "--chat", str(missing))

    assert result.returncode == 0, result.stderr
    lines = shown(result)
    assert f"error: chat {missing} does not exist (chat_not_found)" in lines
    assert ("error: message has 42 characters; the limit is 20 (message_too_large)" in lines
            ), result.stdout
    assert "{" not in result.stdout  # no problem document as JSON


def test_lists_and_picks_chats(jin: str, model: FakeOpenAIServer) -> None:
    ids = []
    for title in ("first plans", "second plans"):
        response = httpx.post(f"{jin}/v1/chats", json={
            "user_id": "terminal-user", "title": title, "system_prompt": ""})
        ids.append(response.json()["id"])
    httpx.post(f"{jin}/v1/chats", json={"user_id": "someone-else", "title": "not yours"})
    model.push(Reply(["noted"]))

    result = run_chat(chat_env(jin), "/chats\n/use 2\nback to it\n/use 9\n")

    assert result.returncode == 0, result.stderr
    out = result.stdout
    # Newest first, this user's only.
    assert out.index("second plans") < out.index("first plans")
    assert "not yours" not in out
    assert f"now in chat {ids[0]} (first plans)" in out
    assert "no chat 9 in the list" in out
    assert [m["content"] for m in messages_of(jin, ids[0])] == ["back to it", "noted"]
    assert messages_of(jin, ids[1]) == []


def _ctrl_c_as_in_a_terminal() -> None:
    """The client starts with Ctrl-C as a shell gives it: handled, not blocked. A child inherits
    its parent's ignored signals and signal mask, and in a whole run something earlier in the
    test process left SIGINT ignored or blocked (the client then streamed on through it)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Typist:
    """A `jin chat` process driven line by line, its output read as it comes."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "chat"], env=env, cwd=ROOT, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0,
            preexec_fn=_ctrl_c_as_in_a_terminal,
        )
        self.out = ""
        self._chars: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while char := self.proc.stdout.read(1):
            self._chars.put(char)

    def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_for(self, text: str, after: int = 0, timeout: float = 30) -> int:
        """Reads until `text` shows after offset `after`; returns where it ends."""
        deadline = time.monotonic() + timeout
        while (at := self.out.find(text, after)) < 0:
            try:
                self.out += self._chars.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError(f"no {text!r} in:\n{self.out}") from None
        return at + len(text)

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def interrupt_at_prompt(self, timeout: float = 30) -> None:
        """Ctrl-C once the client is blocked reading its stdin. A SIGINT that lands between the
        prompt's write and that read is only handled after the read returns: a person never
        types that fast, a test does."""
        syscall = Path(f"/proc/{self.proc.pid}/syscall")
        deadline = time.monotonic() + timeout
        while syscall.read_text().split()[:2] != [READ_SYSCALL, "0x0"]:  # read(0, ...)
            assert time.monotonic() < deadline, "the client never waited for input"
            time.sleep(0.01)
        self.interrupt()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def typist(jin: str) -> Iterator[Typist]:
    t = Typist(chat_env(jin))
    yield t
    t.close()


def test_ctrl_c_stops_the_answer_and_the_second_at_the_prompt_exits(
    jin: str, model: FakeOpenAIServer, typist: Typist
) -> None:
    words = [f"w{i} " for i in range(100)]
    model.push(Reply(words, chunk_delay=0.1))  # 10 s, if nothing stops it
    at = typist.wait_for("you> ")
    typist.type("tell me everything")
    at = typist.wait_for("jin> w0 ", at)

    typist.interrupt()

    at = typist.wait_for("[stopped]\nyou> ", at)
    assert typist.proc.poll() is None  # the client stays
    [chat] = chats_of(jin)
    deadline = time.monotonic() + 10  # the step saves what it kept just after it stops
    while (answer := messages_of(jin, chat["id"])[1])["status"] == "streaming":
        assert time.monotonic() < deadline, "the stopped answer was never saved"
        time.sleep(0.05)
    assert answer["status"] == "interrupted"
    kept = answer["content"]
    assert kept.startswith("w0 ") and len(kept) < len("".join(words))
    assert kept.strip() in typist.out  # what was shown is what was kept

    # The prompt works on; a Ctrl-C there, not right after another, only says how to leave.
    typist.type("/chats")
    at = typist.wait_for("tell me everything", at)
    at = typist.wait_for("you> ", at)
    typist.interrupt_at_prompt()
    at = typist.wait_for("(Ctrl-C again to quit)\nyou> ", at)
    assert typist.proc.poll() is None
    typist.interrupt_at_prompt()
    assert typist.proc.wait(timeout=10) == 0
    assert "Traceback" not in typist.out


class _Breaks(http.server.BaseHTTPRequestHandler):
    """A jin whose connection breaks in the middle of every answer's stream."""

    def do_GET(self) -> None:  # /healthz
        self._json(200, {"status": "ok"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.path == "/v1/chats":
            self._json(201, {"id": str(uuid.uuid4())})
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        event = b'event: message_chunk\ndata: {"message_id": "m", "chunk": "half an "}\n\n'
        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)  # gone before the stream's end

    def _json(self, status: int, body: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_a_connection_that_breaks_mid_answer_ends_the_turn_not_the_client() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Breaks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    typist = Typist(chat_env(f"http://127.0.0.1:{server.server_address[1]}"))
    try:
        at = typist.wait_for("you> ")
        typist.type("hello")
        at = typist.wait_for("half an ", at)
        at = typist.wait_for("[the connection to ", at)
        at = typist.wait_for("send again]\nyou> ", at)
        assert typist.proc.poll() is None  # still at its prompt
        typist.type("/quit")
        assert typist.proc.wait(timeout=10) == 0
    finally:
        typist.close()
        server.shutdown()

"""`jin chat`: a terminal client of a running jin, for a person trying it out.

It talks to the public API only (the same routes an app uses): a chat is created with the first
message, its title taken from that message; answers stream over SSE, reasoning on lines of its
own. Ctrl-C while an answer streams stops that answer (POST /abort: the step keeps what it had,
marked interrupted) and the client stays; Ctrl-C at the prompt right after exits, as do Ctrl-D
and /quit. Problems the API answers with are one line each, never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

import httpx

from llm.sse import SSEDecoder

HELP = """commands:
  /chats      list your chats, newest first
  /use N      continue chat N of the list (or a chat id)
  /new        start a new chat with the next message
  /quit       leave (also Ctrl-D, or Ctrl-C twice)
Ctrl-C while an answer streams stops it."""

TITLE_CHARS = 60


@dataclass(frozen=True)
class Style:
    """Terminal colours, or none when the output is not a terminal (or NO_COLOR is set)."""

    dim: str = ""
    bold: str = ""
    reset: str = ""

    @classmethod
    def for_stream(cls, out: TextIO) -> Style:
        if out.isatty() and not os.environ.get("NO_COLOR"):
            return cls("\x1b[2m", "\x1b[1m", "\x1b[0m")
        return cls()


def base_url(host: str, port: int) -> str:
    """Where a server bound to host:port answers: a wildcard bind is reached on loopback."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal in a URL
    return f"http://{host}:{port}"


def problem_line(response: httpx.Response) -> str:
    """An error answer as one line: the problem's detail and stable code, or the status."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or "code" not in body:
        text = response.text.strip().splitlines()[0][:200] if response.text.strip() else ""
        return f"error: HTTP {response.status_code} {response.reason_phrase} {text}".rstrip()
    detail = body.get("detail") or body.get("title") or ""
    errors = body.get("errors")
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        first = errors[0]
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        detail += f": {where + ': ' if where else ''}{first.get('msg', '')}"
    return f"error: {detail} ({body['code']})"


def events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, data) of each server-sent event."""
    decoder, name = SSEDecoder(), ""
    for line in lines:
        if line.startswith("event:"):
            name = line.partition(":")[2].strip()
        data = decoder.feed(line)
        if data is not None:
            yield name, json.loads(data)


class Answer:
    """Prints one step's events: reasoning labelled and apart, the answer after `jin>`."""

    def __init__(self, out: TextIO, style: Style) -> None:
        self.out, self.style = out, style
        self.part = ""  # "thinking" or "answer" while one is being written
        self.status = ""

    def _line(self, text: str) -> None:
        self._end_part()
        self.out.write(text + "\n")
        self.out.flush()

    def _end_part(self) -> None:
        if self.part:
            self.out.write(self.style.reset + "\n")
            self.part = ""

    def _write(self, part: str, label: str, chunk: str, colour: str) -> None:
        if self.part != part:
            self._end_part()
            self.out.write(f"{self.style.bold}{label}{self.style.reset} {colour}")
            self.part = part
        self.out.write(chunk)
        self.out.flush()

    def event(self, name: str, data: dict[str, Any]) -> None:
        s = self.style
        if name == "thinking_chunk":
            self._write("thinking", "thinking:", data["chunk"], s.dim)
        elif name == "message_chunk":
            self._write("answer", "jin>", data["chunk"], "")
        elif name == "brain_chunk":  # the brain's own words, before their translation
            self._write("brain", "brain:", data["chunk"], s.dim)
        elif name == "message_error":
            self._line(f"[error: {data['text']} ({data['code']})]")
        elif name == "runtime_action" and data.get("via"):  # a runtime action (web search)
            outcome = f" {data['result']}" if data.get("result") else ""
            self._line(f"{s.dim}[{data['action']} {data['text']!r}: {data['status']}"
                       f"{outcome}]{s.reset}")
        elif name == "runtime_action":
            self._line(f"{s.dim}[memory: {data['action']} {data['text']!r}: "
                       f"{data['status']}]{s.reset}")
        elif name == "compaction" and not data.get("skipped"):
            self._line(f"{s.dim}[compacted: {data['tokens_before']} -> "
                       f"{data['tokens_after']} tokens]{s.reset}")
        elif name == "message_end":
            self.status = data["status"]

    def finish(self, stopped: bool = False) -> None:
        if stopped:
            self._line("[stopped]")
        elif self.status == "interrupted":
            self._line("[interrupted]")
        else:
            self._end_part()


class Terminal:
    """The conversation loop: reads lines, runs steps, answers commands."""

    def __init__(
        self, client: httpx.Client, base: str, *, user: str, system: str, chat_id: str | None,
        out: TextIO = sys.stdout,
    ) -> None:
        self.client, self.base, self.user, self.system = client, base, user, system
        self.chat_id = chat_id
        self.out, self.style = out, Style.for_stream(out)
        self.listed: list[dict[str, Any]] = []
        self.just_stopped = False  # the last thing was a Ctrl-C: one more at the prompt exits
        self.prompt = f"{self.style.bold}you>{self.style.reset} "

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        """The response, or None after saying what the problem was."""
        response = self.client.request(method, f"{self.base}{path}", **kwargs)
        if response.status_code >= 400:
            self.say(problem_line(response))
            return None
        return response

    def open(self) -> None:
        """Check that jin answers (and that a given chat exists) before the first prompt."""
        self.client.get(f"{self.base}/healthz")
        where = "a new chat" if self.chat_id is None else f"chat {self.chat_id}"
        if self.chat_id is not None and not self._request("GET", f"/v1/chats/{self.chat_id}"):
            self.chat_id = None
            where = "a new chat"
        s = self.style
        self.say(f"{s.dim}jin at {self.base}, user {self.user}, {where}. "
                 f"/help for commands, Ctrl-D to quit{s.reset}")

    def run(self) -> int:
        self.open()
        while True:
            try:
                line = input(self.prompt).strip()
            except EOFError:
                self.say("")
                return 0
            except KeyboardInterrupt:
                if self.just_stopped:
                    self.say("")
                    return 0
                self.just_stopped = True
                self.say("\n(Ctrl-C again to quit)")
                continue
            self.just_stopped = False
            if not line:
                continue
            try:
                if line.startswith("/"):
                    if self.command(line) == "quit":
                        return 0
                else:
                    self.step(line)
            except KeyboardInterrupt:  # while listing or switching chats
                self.just_stopped = True
                self.say("[stopped]")
            except httpx.TransportError as exc:  # jin restarting, a dropped stream: this turn
                self.say(f"[the connection to {self.base} broke ({type(exc).__name__}); "
                         "what was said so far is kept - send again]")

    def command(self, line: str) -> str | None:
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        if name in ("/quit", "/exit"):
            return "quit"
        if name == "/help":
            self.say(HELP)
        elif name == "/chats":
            self.list_chats()
        elif name == "/use" and arg:
            self.use(arg)
        elif name == "/new":
            self.chat_id = None
            self.say("the next message starts a new chat")
        else:
            self.say(f"unknown command {line!r}; /help lists them")
        return None

    def list_chats(self) -> None:
        response = self._request("GET", "/v1/chats", params={"user_id": self.user, "limit": 20})
        if response is None:
            return
        self.listed = response.json()["chats"]
        if not self.listed:
            self.say(f"no chats yet for user {self.user}")
        for n, chat in enumerate(self.listed, start=1):
            mark = "*" if chat["id"] == self.chat_id else " "
            self.say(f"{mark}{n:>3}  {chat['created_at'][:16].replace('T', ' ')}  "
                     f"{chat['title'] or '(untitled)'}  {self.style.dim}{chat['id']}"
                     f"{self.style.reset}")

    def use(self, arg: str) -> None:
        chat_id = arg
        if arg.isdigit():
            if not 1 <= int(arg) <= len(self.listed):
                self.say(f"no chat {arg} in the list; /chats lists them")
                return
            chat_id = self.listed[int(arg) - 1]["id"]
        response = self._request("GET", f"/v1/chats/{chat_id}")
        if response is not None:
            self.chat_id = response.json()["id"]
            self.say(f"now in chat {self.chat_id} ({response.json()['title'] or 'untitled'})")

    def _new_chat(self, first_message: str) -> str | None:
        title = " ".join(first_message.split())
        if len(title) > TITLE_CHARS:
            title = title[: TITLE_CHARS - 1] + "…"
        response = self._request("POST", "/v1/chats", json={
            "user_id": self.user, "title": title, "system_prompt": self.system})
        return None if response is None else response.json()["id"]

    def step(self, content: str) -> None:
        answer = Answer(self.out, self.style)
        try:
            if self.chat_id is None:
                self.chat_id = self._new_chat(content)
                if self.chat_id is None:
                    return
            with self.client.stream(
                "POST", f"{self.base}/v1/chats/{self.chat_id}/messages",
                json={"content": content}, headers={"Accept": "text/event-stream"},
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    self.say(problem_line(response))
                    return
                try:
                    for name, data in events(response.iter_lines()):
                        answer.event(name, data)
                except KeyboardInterrupt:
                    # The step runs now (its headers came): stop it where it runs, on any
                    # worker. Closing the stream, as leaving this block does, stops it too,
                    # but only once the server notices.
                    self._abort()
                    raise
        except KeyboardInterrupt:
            self.just_stopped = True
            answer.finish(stopped=True)
            return
        answer.finish()

    def _abort(self) -> None:
        try:
            self.client.post(f"{self.base}/v1/chats/{self.chat_id}/abort",
                             timeout=httpx.Timeout(5.0))
        except httpx.TransportError:
            pass  # the stream closes next, which stops the step as well


def chat(base: str, *, key: str | None, user: str, system: str, chat_id: str | None) -> int:
    """Run the client until the person leaves; 1 when nothing answers at `base`."""
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(timeout=httpx.Timeout(10.0, read=None), headers=auth) as client:
        terminal = Terminal(client, base, user=user, system=system, chat_id=chat_id)
        if sys.stdin.isatty():  # line editing and history at the prompt, where there is readline
            try:
                import readline  # noqa: F401
            except ImportError:
                pass
            else:  # readline counts the prompt's width without its colour codes
                s = terminal.style
                terminal.prompt = f"\001{s.bold}\002you>\001{s.reset}\002 " if s.bold else "you> "
        try:
            return terminal.run()
        except KeyboardInterrupt:  # before the first prompt
            return 130
        except httpx.ConnectError:
            print(f"jin chat: nothing answers at {base} - start it with `make run`",
                  file=sys.stderr)
        except httpx.TransportError as exc:
            print(f"jin chat: the connection to {base} broke ({type(exc).__name__})",
                  file=sys.stderr)
        return 1

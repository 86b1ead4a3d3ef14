"""Real processes for fault tests: `jin serve` workers, and a Postgres of a test's own.

A worker's output goes to a file, not a pipe: a worker that logs a lot while its database is
down would otherwise fill the pipe and block on a write, which looks like a hang of jin's.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class JinProcess:
    """One `jin serve` process: its URL, the process and its log."""

    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]

    def log(self) -> str:
        self.log_file.flush()
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, no step persists, no lease is released."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log_file.close()


def start_jin(env: dict[str, str], log_path: Path, *, ready_within: float = 60) -> JinProcess:
    """Start `jin serve` on a free port with `env` over this process's environment; returns once
    /readyz answers 200."""
    port = free_port()
    log_file = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--port", str(port)],
        env={**os.environ, "JIN_LOG_LEVEL": "warning", **env},
        stdout=log_file, stderr=subprocess.STDOUT,
    )
    worker = JinProcess(f"http://127.0.0.1:{port}", proc, log_path, log_file)
    deadline = time.monotonic() + ready_within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = worker.log()
            worker.stop()
            raise RuntimeError(f"jin serve exited with {proc.returncode}:\n{text}")
        try:
            if httpx.get(f"{worker.url}/readyz", timeout=1).status_code == 200:
                return worker
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    worker.stop()
    raise RuntimeError(f"jin serve did not become ready:\n{worker.log()}")


class OwnPostgres:
    """An embedded Postgres (pgserver) in its own data directory, on its own socket, that a test
    may stop and start without touching the server the other tests share."""

    def __init__(self, data_dir: Path) -> None:
        import pgserver

        self._pgserver = pgserver
        self.server = pgserver.get_server(data_dir, cleanup_mode="delete")
        self.data_dir = self.server.pgdata
        self.socket_dir = self.server.get_postmaster_info().socket_dir

    def url(self, database: str = "postgres") -> str:
        return self.server.get_uri(database=database)

    def _pg_ctl(self, *args: str) -> None:
        self._pgserver.pg_ctl(["-w", *args], pgdata=self.data_dir,
                              user=self.server.system_user, timeout=30)

    def stop(self) -> None:
        """Fast shutdown: open sessions are terminated (57P01), new ones refused."""
        self._pg_ctl("-m", "fast", "stop")

    def start(self) -> None:
        """Start again on the same socket (the options pgserver started it with)."""
        self._pg_ctl("-o", '-h ""', "-o", f"-k {self.socket_dir}",
                     "-l", str(self.data_dir / "log"), "start")

    def cleanup(self) -> None:
        # pgserver stops only the postmaster it started itself; after a restart that one is
        # gone, so the one running now is stopped here before pgserver deletes the directory.
        if (self.data_dir / "postmaster.pid").exists():
            self.stop()
        self.server.cleanup()

"""Processes a benchmark needs: a Postgres, the fake model server, jin workers. Loopback only."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from api.database import migrate

# The processes a benchmark started, by the URL they serve (the embedded Postgres by its URL):
# what cpu_seconds reads. A Postgres given by DATABASE_URL is not here: it may be elsewhere.
PIDS: dict[str, int] = {}
CLOCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system time of a process and its reaped children so far, or 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / CLOCK


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def tree_cpu(pid: int) -> float:
    """cpu_seconds of a process and of its live children (Postgres's backends, the worker
    processes of `jin serve --workers N`)."""
    return cpu_seconds(pid) + sum(tree_cpu(child) for child in children(pid))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database(stack: ExitStack) -> str:
    """DATABASE_URL when set, else a throwaway embedded Postgres; migrated either way."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        import pgserver

        tmp = Path(tempfile.mkdtemp(prefix="jin-bench-"))
        server = pgserver.get_server(tmp / "pg", cleanup_mode="delete")
        stack.callback(server.cleanup)
        url = server.get_uri()
        PIDS[url] = int((tmp / "pg" / "postmaster.pid").read_text().split()[0])
    migrate(url)
    return url


def _wait_ready(url: str, proc: subprocess.Popen[bytes], path: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        try:
            if httpx.get(url + path, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{proc.args} did not become ready")


def spawn(stack: ExitStack, args: list[str], env: dict[str, str], ready: str) -> subprocess.Popen:
    # JIN_BENCH_LOGS=DIR keeps each process's stderr there (why a step failed, for instance).
    logs = os.environ.get("JIN_BENCH_LOGS")
    if logs:
        Path(logs).mkdir(parents=True, exist_ok=True)
    err = open(Path(logs) / f"{args[1]}-{time.time_ns()}.log", "wb") if logs else None  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, *args], env={**os.environ, **env},
        stdout=subprocess.DEVNULL, stderr=err or subprocess.DEVNULL,
    )

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        if err is not None:
            err.close()

    stack.callback(stop)
    _wait_ready(ready.rsplit("|", 1)[0], proc, ready.rsplit("|", 1)[1])
    return proc


def fake_model(
    stack: ExitStack, chunks: int = 1, chunk_delay: float = 0.0, first_token_delay: float = 0.0,
    embed_delay: float = 0.0,
) -> str:
    port = free_port()
    args = ["-m", "llm.testing", "--port", str(port), "--chunks", str(chunks),
            "--chunk-delay", str(chunk_delay), "--first-token-delay", str(first_token_delay),
            "--embed-delay", str(embed_delay)]
    proc = spawn(stack, args, {}, f"http://127.0.0.1:{port}|/v1/models")
    PIDS[f"http://127.0.0.1:{port}/v1"] = proc.pid
    return f"http://127.0.0.1:{port}/v1"


def jin_worker(
    stack: ExitStack, database_url: str, model_url: str, workers: int = 1, **env: str
) -> str:
    port = free_port()
    args = ["-m", "api.cli", "serve", "--port", str(port), "--workers", str(workers)]
    proc = spawn(stack, args, {
        "DATABASE_URL": database_url, "JIN_BRAIN_URL": model_url, "JIN_HELPER_URL": model_url,
        # Every model role on the fake, the embedder too: the figures are the server's own time.
        "JIN_EMBEDDER_URL": model_url, "JIN_EMBEDDER_MODEL": "fake-embedder",
        "JIN_LOG_LEVEL": "warning",
        # The step's figures as measured before L1 runtime memory (an echo as the helper would
        # add a rewrite per step); L1's own cost is measured on its own (issue 22, point 4).
        "JIN_RUNTIME_MEMORY": "false", "JIN_EVENTS_ENABLED": "false", **env,
    }, f"http://127.0.0.1:{port}|/readyz")
    PIDS[f"http://127.0.0.1:{port}"] = proc.pid
    return f"http://127.0.0.1:{port}"


def balancer(stack: ExitStack, backends: list[str]) -> str:
    """bench/balancer.py in its own process, round robin over the backends' URLs."""
    port = free_port()
    spawn(stack, ["-m", "bench.balancer", "--port", str(port), *backends], {},
          f"http://127.0.0.1:{port}|/readyz")
    return f"http://127.0.0.1:{port}"

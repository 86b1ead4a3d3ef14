"""Two versions of jin, side by side on this machine: steps/s and CPU per step, alternated.

    .venv/bin/python -m bench.side_by_side BASE [CHANGED] [--rounds 4] [--seconds 6]
        [--chats 32] [--seq 300] [--swap] [--changed-env NAME=VALUE ...]

BASE and CHANGED are git revisions (checked out into temporary worktrees) or directories;
CHANGED defaults to this working tree. Each side gets its own embedded Postgres, migrated by its
own code (schemas may differ), and its own `jin serve` worker started from its own tree; one fake
model server (this tree's, zero delay) serves both.

- `--seq N`: N steps on 10-message chats, one side then the other, step by step, so that the
  machine's drift hits both alike: the medians of the server's overhead (Server-Timing less the
  model's time, as bench/step_overhead.py reports it).
- Each round: a concurrent phase per side (`--chats` new chats of 10 messages, `--seconds`),
  the order alternating round to round; steps/s, and the CPU seconds per step of the worker, of
  its Postgres and of the fake (/proc), the figure that does not depend on how busy the machine
  happens to be.
- `--changed-env NAME=VALUE`: a setting for the changed side's worker only (the same tree
  twice, with `JIN_COMPACTION=false` on one side, measures what compaction costs).
- `--swap`: the whole run again with the sides' start order swapped. On these machines the
  worker started first has come out a few percent ahead whichever code it ran: compare the mean
  of both orders.

Prints figures; never passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness import (  # noqa: E402
    PIDS,
    _wait_ready,
    children,
    cpu_seconds,
    fake_model,
    free_port,
)
from bench.step_overhead import client_session, make_chats, pct, settle, step  # noqa: E402
from db.engine import create_engine  # noqa: E402


@dataclass
class Side:
    name: str
    tree: Path
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    db: str = ""
    worker: int = 0
    postmaster: int = 0
    seq: list[float] = field(default_factory=list)
    rounds: list[dict[str, float]] = field(default_factory=list)

    def postgres_cpu(self) -> float:
        return cpu_seconds(self.postmaster) + sum(cpu_seconds(p) for p in children(self.postmaster))


def checkout(stack: ExitStack, ref: str) -> Path:
    if Path(ref).is_dir():
        return Path(ref).resolve()
    path = Path(tempfile.mkdtemp(prefix="jin-side-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path), ref],
                   check=True, capture_output=True)
    stack.callback(subprocess.run, ["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                    str(path)], capture_output=True)
    return path


def own_database(stack: ExitStack, side: Side) -> None:
    import pgserver

    data = Path(tempfile.mkdtemp(prefix=f"jin-side-{side.name}-"))
    data.chmod(0o777)  # as root, pgserver runs Postgres as its own user
    server = pgserver.get_server(data / "pg", cleanup_mode="delete")
    stack.callback(server.cleanup)
    side.db = server.get_uri()
    side.postmaster = int((data / "pg" / "postmaster.pid").read_text().split()[0])
    subprocess.run([sys.executable, "-c", "import sys; from api.database import migrate; "
                    "migrate(sys.argv[1])", side.db], cwd=side.tree, check=True,
                   env={**os.environ, "PYTHONPATH": str(side.tree)}, capture_output=True)


def start_worker(stack: ExitStack, side: Side, model_url: str) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--port", str(port)], cwd=side.tree,
        env={**os.environ, "PYTHONPATH": str(side.tree), "DATABASE_URL": side.db,
             "JIN_BRAIN_URL": model_url, "JIN_HELPER_URL": model_url,
             "JIN_EMBEDDER_URL": model_url, "JIN_EMBEDDER_MODEL": "fake-embedder",
             "JIN_LOG_LEVEL": "warning", **side.env},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stack.callback(lambda: (proc.terminate(), proc.wait(timeout=15)))
    side.url, side.worker = f"http://127.0.0.1:{port}", proc.pid
    _wait_ready(side.url, proc, "/readyz")


async def sequential(sides: list[Side], steps: int) -> None:
    engines = {s.name: create_engine(s.db, pool_size=2) for s in sides}
    clients = {s.name: client_session(s.url) for s in sides}
    try:
        chats = {s.name: await make_chats(clients[s.name], engines[s.name], 10, 10)
                 for s in sides}
        for engine in engines.values():
            await settle(engine)
        for i in range(steps):
            for side in sides if i % 2 == 0 else sides[::-1]:
                overhead, _ = await step(clients[side.name], chats[side.name][i % 10], i)
                if i >= 20:  # warmed up
                    side.seq.append(overhead)
    finally:
        for client in clients.values():
            await client.aclose()
        for engine in engines.values():
            await engine.dispose()


async def concurrent(side: Side, n_chats: int, seconds: float, fake: int) -> None:
    engine = create_engine(side.db, pool_size=2)
    async with client_session(side.url) as client:
        chats = await make_chats(client, engine, n_chats, 10)
        await settle(engine)
        done = 0
        stop_at = time.perf_counter() + seconds

        async def chat(chat_id: str) -> None:
            nonlocal done
            i = 0
            while time.perf_counter() < stop_at:
                await step(client, chat_id, i)
                done, i = done + 1, i + 1

        before = (cpu_seconds(side.worker), side.postgres_cpu(), cpu_seconds(fake))
        started = time.perf_counter()
        await asyncio.gather(*(chat(c) for c in chats))
        elapsed = time.perf_counter() - started
        after = (cpu_seconds(side.worker), side.postgres_cpu(), cpu_seconds(fake))
    await engine.dispose()
    worker, postgres, model = ((a - b) / done * 1000 for a, b in zip(after, before, strict=True))
    side.rounds.append({"steps_per_s": done / elapsed, "worker_ms": worker,
                        "postgres_ms": postgres, "fake_ms": model})


def run(args: argparse.Namespace, first: tuple[str, Path], second: tuple[str, Path]) -> None:
    changed_env = dict(pair.split("=", 1) for pair in args.changed_env)
    with ExitStack() as stack:
        model_url = fake_model(stack)
        sides = [Side(name, tree, changed_env if name == "changed" else {})
                 for name, tree in (first, second)]
        for side in sides:
            own_database(stack, side)
        for side in sides:  # started in this order: see --swap
            start_worker(stack, side, model_url)
        fake = PIDS[model_url]  # (not any llm.testing: other runs on the machine have theirs)
        if args.seq:
            asyncio.run(sequential(sides, args.seq))
        for r in range(args.rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                asyncio.run(concurrent(side, args.chats, args.seconds, fake))
                f = side.rounds[-1]
                print(f"  round {r} {side.name}: {f['steps_per_s']:5.0f} steps/s, CPU a step: "
                      f"worker {f['worker_ms']:.2f} ms, Postgres {f['postgres_ms']:.2f} ms, "
                      f"fake {f['fake_ms']:.2f} ms", flush=True)
        for side in sides:
            med = {k: statistics.median(r[k] for r in side.rounds) for k in side.rounds[0]
                   } if side.rounds else {}  # (--rounds 0: the sequential steps alone)
            seq = (f"sequential overhead at 10 messages median {statistics.median(side.seq):.2f}"
                   f" ms, p99 {pct(side.seq, 0.99):.2f}" if side.seq else "")
            rounds = (f"{med['steps_per_s']:.0f} steps/s, CPU a step: worker "
                      f"{med['worker_ms']:.2f} ms, Postgres {med['postgres_ms']:.2f} ms, fake "
                      f"{med['fake_ms']:.2f} ms; " if med else "")
            print(f"{side.name}: {rounds}{seq}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", help="git revision or directory")
    parser.add_argument("changed", nargs="?", default=str(ROOT),
                        help="git revision or directory (default: this tree)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--chats", type=int, default=32)
    parser.add_argument("--seq", type=int, default=0, help="interleaved sequential steps")
    parser.add_argument("--swap", action="store_true", help="again, started the other way")
    parser.add_argument("--changed-env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for the changed side's worker only")
    args = parser.parse_args()
    with ExitStack() as stack:
        base = ("base", checkout(stack, args.base))
        changed = ("changed", checkout(stack, args.changed))
        print(f"base {args.base} ({base[1]}), changed {args.changed} ({changed[1]})")
        print("started base first:")
        run(args, base, changed)
        if args.swap:
            print("started changed first:")
            run(args, changed, base)


if __name__ == "__main__":
    main()

"""`jin import`'s speed: writing and indexing against the embedder alone, and steps meanwhile.

    .venv/bin/python bench/import_speed.py [--short 2000] [--long 500] [--threads 1,2]
        [--steps 200] [--during 3000] [--chats 30] [--history 600]

(e5's engine takes its thread count once a process: with JIN_EMBEDDER=e5, one `--threads` value
a run.)

Synthetic conversations (seeded; no public dataset): short turns of 8-30 words, and long ones of
250-400 words (cut, as the indexer cuts them, at memory/indexer.py MAX_CHARS), one user's, in
the OpenAI messages format, one conversation of 10 turns a line. For each thread count and
length, in one run, side by side:

1. the embedder alone: the built-in one (`JIN_EMBEDDER`: e5 unless set, JIN_EMBED_THREADS
   threads) on the same texts,
   in the indexer's batches, after a warm-up, just before and just after step 2 (their mean);
2. the full import path, on a fresh database: `jin import`'s code (api/history_import.py) writes
   the file (messages/s written), then indexes the queue (messages/s indexed, and its ratio to
   the embedder alone). The user has more messages than JIN_RECALL_ANN_FROM, so their vectors
   go into the HNSW index as they are written, as in a real import.

Then the step overhead (bench/step_overhead.py's measure: the worker's Server-Timing less the
model's time) of sequential steps on a real `jin serve` worker, fake models, memory on, over
`--chats` chats of as many users in turn, each user arriving with `--history` past messages
(imported and indexed with the worker's own fake embedder: recall then ranks a full keyword scan
from the first step, so the users' growth over the phase moves a step little): idle,
then while a `jin import` process (its defaults: every core, JIN_IMPORT_NICE) imports and
indexes `--during` short messages of another user, stopped (SIGSTOP) and let go in turn every
`--window` seconds, so that steps with and without the import meet the machine alike. The
worker's own indexer is told to leave backfill alone (its fake embedder must not index the
import).
Prints figures; never passes or fails on time.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import asyncpg
from sqlalchemy import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.database import migrate  # noqa: E402
from api.embedders import build_embedder  # noqa: E402
from api.history_import import run_import  # noqa: E402
from api.settings import Settings  # noqa: E402
from bench.harness import database, fake_model, jin_worker  # noqa: E402
from bench.step_overhead import client_session, speed_probe, step  # noqa: E402
from memory.indexer import MAX_CHARS  # noqa: E402

TURNS = 10  # a conversation's
WORDS = ("locker key garden recipe invoice train ticket doctor appointment budget meeting "
         "project deadline birthday gift sister brother holiday flight hotel museum painting "
         "guitar lesson running shoes marathon coffee tea bakery bread soup salad laptop "
         "battery charger printer paper contract lawyer landlord rent deposit plumber leak "
         "kitchen window balcony plant tomato basil cat vet vaccine dog walk park river boat "
         "camera lens photo album song concert ticket novel chapter library course exam "
         "teacher homework spreadsheet report server database backup password router").split()


def sentence(rng: random.Random, words: int) -> str:
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return body[0].upper() + body[1:] + f" (ref {rng.randint(1000, 9999)})."


def texts(kind: str, n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    low, high = (8, 30) if kind == "short" else (250, 400)
    return [sentence(rng, rng.randint(low, high)) for _ in range(n)]


def openai_file(contents: list[str]) -> str:
    """Conversations of TURNS turns, a line each, user and assistant in turn, a minute apart."""
    lines = []
    start = 1_700_000_000
    for c in range(0, len(contents), TURNS):
        messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": text,
                     "created_at": start + (c + i) * 60}
                    for i, text in enumerate(contents[c : c + TURNS])]
        lines.append(json.dumps({"id": f"bench-{c}", "messages": messages}))
    return "\n".join(lines) + "\n"


def embedder_alone(contents: list[str], threads: int) -> float:
    """Messages/s of the built-in embedder (JIN_EMBEDDER, as the import path builds it) by
    itself, in the indexer's batches (64)."""
    embedder, _ = build_embedder(Settings(embed_threads=threads), None)
    cut = [t[:MAX_CHARS] for t in contents]

    async def run() -> float:
        await embedder.embed(contents[:64])  # load and warm up
        started = time.perf_counter()
        for i in range(0, len(cut), 64):
            await embedder.embed(cut[i : i + 64])
        return len(cut) / (time.perf_counter() - started)

    return asyncio.run(run())


async def _admin(admin_url: str, statement: str) -> None:
    parsed = make_url(admin_url)
    conn = await asyncpg.connect(user=parsed.username, password=parsed.password or None,
                                 database=parsed.database,
                                 host=parsed.query.get("host") or parsed.host, port=parsed.port)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def fresh_database(admin_url: str) -> str:
    name = f"jin_import_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(admin_url, f"CREATE DATABASE {name}"))
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    migrate(url)
    return url


def import_path(admin_url: str, contents: list[str], threads: int) -> dict[str, float]:
    url = fresh_database(admin_url)
    # A claim outlives a batch's embedding even on a machine 20 times slower than usual (64
    # long texts took 64 s on one): an expired claim is embedded again by the next claim.
    settings = Settings(database_url=url, embed_threads=threads, indexer_claim_seconds=600)
    report = asyncio.run(run_import(settings, url, openai_file(contents), "bench", user="bench",
                                    tenant="default", out=io.StringIO()))
    assert report.indexed == len(contents), report
    return {"write": report.messages_written / report.write_seconds,
            "index": report.indexed / report.index_seconds,
            "total": len(contents) / (report.write_seconds + report.index_seconds)}


def side_by_side(args: argparse.Namespace, admin_url: str) -> None:
    print(f"{'threads':>7} {'texts':>6} {'n':>5} | {'embedder alone':>14} | {'import writes':>13}"
          f" | {'indexing':>8} (ratio) | {'write+index':>11}   messages/s")
    for threads in args.threads:
        for kind, n in (("short", args.short), ("long", args.long)):
            contents = texts(kind, n, seed=n)
            # Before and after the import path, their mean: the machine's pace drifts.
            before = embedder_alone(contents, threads)
            path = import_path(admin_url, contents, threads)
            alone = (before + embedder_alone(contents, threads)) / 2
            print(f"{threads:>7} {kind:>6} {n:>5} | {alone:>14.1f} | {path['write']:>13.0f} | "
                  f"{path['index']:>8.1f} ({path['index'] / alone:4.0%}) | "
                  f"{path['total']:>11.1f}", flush=True)


# The live chat's questions: sentences of the import's vocabulary, each its own (the same
# filler in every step made every earlier row match every question, and the chat's recall, not
# the import, made its steps slower as it grew: bench/README.md, the keyword list's BM25).
QUESTIONS = random.Random(3)


def question() -> str:
    return sentence(QUESTIONS, 12)


async def overheads(jin_url: str, chats: list[str], steps: int) -> list[float]:
    """Step overhead (ms) of `steps` sequential steps, on the chats in turn."""
    async with client_session(jin_url) as client:
        return [(await step(client, chats[i % len(chats)], i, question()))[0]
                for i in range(steps)]


async def alternating(
    jin_url: str, chats: list[str], proc: subprocess.Popen[bytes], window: float
) -> tuple[list[float], list[float]]:
    """Step overheads (ms) while the import runs and while it is stopped (SIGSTOP), in
    alternating windows until it ends: both see the machine at the same moments (its pace and
    the other loads on it drift within minutes). The first 0.3 s of a window is not counted:
    a statement the import sent goes on in Postgres after the import stops."""
    running: list[float] = []
    stopped: list[float] = []
    async with client_session(jin_url) as client:
        i, paused = 0, False
        while proc.poll() is None:
            proc.send_signal(signal.SIGSTOP if paused else signal.SIGCONT)
            into = stopped if paused else running
            start = time.perf_counter()
            while time.perf_counter() - start < window and proc.poll() is None:
                overhead = (await step(client, chats[i % len(chats)], i, question()))[0]
                i += 1
                if time.perf_counter() - start > 0.3:
                    into.append(overhead)
            paused = not paused
        proc.send_signal(signal.SIGCONT)
    return running, stopped


async def new_chats(jin_url: str, db_url: str, model_url: str, n: int, history: int
                    ) -> list[str]:
    """`n` new chats, each of a user of its own who arrives with `history` past messages (in
    chats of their own, imported and indexed with the worker's own fake embedder)."""
    chats = []
    settings = Settings(database_url=db_url, embedder_url=model_url,
                        embedder_model="fake-embedder")
    async with client_session(jin_url) as client:
        for _ in range(n):
            user = f"live-{uuid.uuid4().hex[:8]}"
            if history:
                past = openai_file(texts("short", history, seed=100 + len(chats)))
                await run_import(settings, db_url, past, "history", user=user, tenant="default",
                                 out=io.StringIO())
            chats.append(str((await client.post("/v1/chats", json={"user_id": user})).json()["id"]))
    return chats


def during_import(args: argparse.Namespace, db_url: str) -> None:
    with ExitStack() as stack:
        model_url = fake_model(stack)
        # The worker never backfills here: its fake embedder must leave the import's rows.
        jin_url = jin_worker(stack, db_url, model_url,
                             JIN_INDEXER_BACKFILL_QUIET_SECONDS="1000000")
        chats = asyncio.run(new_chats(jin_url, db_url, model_url, args.chats, args.history))
        asyncio.run(overheads(jin_url, chats, 20 + args.chats))  # warm-up: every chat's first
        idle = asyncio.run(overheads(jin_url, chats, args.steps))
        file = Path(tempfile.mkdtemp(prefix="jin-import-")) / "history.jsonl"
        file.write_text(openai_file(texts("short", args.during, seed=7)))
        env = {**os.environ, "DATABASE_URL": db_url, "JIN_LOG_LEVEL": "warning",
               "JIN_INDEXER_CLAIM_SECONDS": "600"}
        env.pop("JIN_EMBED_THREADS", None)  # the default: every core
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "api.cli", "import", str(file),
                                 "--user", "importer"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        time.sleep(3)  # past its start (model load, migrations check), into its indexing
        running, stopped = asyncio.run(alternating(jin_url, chats, proc, args.window))
        out, _ = proc.communicate()
        elapsed = time.perf_counter() - started
        report = json.loads(out or b"{}")
        after = asyncio.run(overheads(jin_url, chats, args.steps))  # the chats as long now
    p50_idle = statistics.median(idle)
    p50_run, p50_stop = statistics.median(running), statistics.median(stopped)
    print(f"\nstep overhead p50, sequential steps on one worker, {args.chats} chats of "
          f"{args.chats} users in turn: before the import "
          f"{p50_idle:.2f} ms ({len(idle)} steps); during `jin import` of {args.during} "
          f"messages, in alternating {args.window:.0f} s windows: import running {p50_run:.2f} ms "
          f"({len(running)} steps), import stopped {p50_stop:.2f} ms ({len(stopped)} steps): "
          f"{p50_run / p50_stop:.2f}x the stopped windows, {p50_run / p50_idle:.2f}x before; "
          f"after the import {statistics.median(after):.2f} ms ({len(after)} steps)")
    print(f"the import meanwhile: {report.get('messages_written')} written, "
          f"{report.get('indexed')} indexed in {elapsed:.1f} s, stopped half of it "
          f"(process start included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--short", type=int, default=2000, help="short messages per run")
    parser.add_argument("--long", type=int, default=500, help="long messages per run")
    parser.add_argument("--threads", type=lambda s: [int(t) for t in s.split(",")],
                        default=[1, 2], help="embedding thread counts, a comma list")
    parser.add_argument("--steps", type=int, default=200, help="idle steps measured")
    parser.add_argument("--during", type=int, default=3000,
                        help="messages imported while steps are measured")
    parser.add_argument("--chats", type=int, default=30,
                        help="live chats (each of its own user) the steps go to in turn: "
                             "live steps come from many users, and one chat's growth over "
                             "the phase would be measured with the import")
    parser.add_argument("--history", type=int, default=600,
                        help="past messages each live user arrives with: more than recall's "
                             "keyword scan ranks (500), so that the steps' recall costs what a "
                             "long-standing user's does from the first step, and the users' "
                             "growth over the phase does not move it (0: new users)")
    parser.add_argument("--window", type=float, default=2.0,
                        help="seconds the import runs, then is stopped, in turn")
    parser.add_argument("--steps-only", action="store_true",
                        help="only the step overhead during an import")
    parser.add_argument("--no-steps", action="store_true",
                        help="only the import and indexing against the embedder alone")
    args = parser.parse_args()
    with ExitStack() as stack:
        db_url = database(stack)
        print(f"{os.cpu_count()} cores; {speed_probe()}\n")
        if not args.steps_only:
            side_by_side(args, db_url)
        if not args.no_steps:
            during_import(args, db_url)
        print(f"\nat the end: {speed_probe()}")


if __name__ == "__main__":
    main()

"""The `jin` command: serve, migrate, import, chat, memory."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import ValidationError

from api import logs
from api.settings import Settings
from memory.evaluation.ablations import LAYERS, parse_layers


def _database(settings: Settings) -> tuple[str, Callable[[], None] | None]:
    """The configured database, or the embedded one with the function that stops it."""
    if settings.database_url:
        return settings.database_url, None
    from api.database import start_embedded

    embedded = start_embedded(settings.data_dir)
    return embedded.url, embedded.stop


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api.app import create_app
    from api.database import migrate

    settings = Settings()
    overrides: dict[str, Any] = {}
    if args.host:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    url, stop_database = _database(settings)
    migrate(url, embedding_dim=settings.embedding_dim)
    settings = settings.model_copy(update={**overrides, "database_url": url})
    common: dict[str, Any] = {
        "host": settings.host, "port": settings.port, "log_level": settings.log_level,
        "timeout_graceful_shutdown": 10, "access_log": False,  # the edge logs requests
        "log_config": logs.config(settings.log_level, settings.log_format),
    }
    if args.workers > 1:
        # Worker processes build their app from the environment; hand them the resolved URL
        # and the bind (keys are required off loopback), and a directory where each writes its
        # metrics so that /metrics on any of them sums all.
        os.environ["JIN_DATABASE_URL"] = url
        os.environ["JIN_HOST"] = settings.host
        made = None
        if settings.prometheus_multiproc_dir is None:
            made = tempfile.mkdtemp(prefix="jin-metrics-")  # this run's alone, removed after
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = made
        try:
            uvicorn.run("api.app:app_from_env", factory=True, workers=args.workers, **common)
        finally:
            if made is not None:
                shutil.rmtree(made, ignore_errors=True)
            if stop_database is not None:
                stop_database()
    else:
        uvicorn.run(create_app(settings, on_shutdown=stop_database), **common)
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from api.database import downgrade, migrate

    settings = Settings()
    url, stop_database = _database(settings)
    try:
        if args.downgrade:
            downgrade(url, args.downgrade)
        else:
            migrate(url, args.revision, embedding_dim=settings.embedding_dim)
    finally:
        if stop_database is not None:
            stop_database()
    return 0


@contextmanager
def _migrated(settings: Settings) -> Iterator[str]:
    """The database URL, migrated to head; an embedded Postgres started here stops after."""
    from api.database import migrate

    url, stop_database = _database(settings)
    try:
        migrate(url, embedding_dim=settings.embedding_dim)
        yield url
    finally:
        if stop_database is not None:
            stop_database()


def _reindex(args: argparse.Namespace) -> int:
    """Re-embed every message and fact with the configured embedder (resumable)."""
    import asyncio

    from api.reindex import reindex

    settings = Settings()
    with _migrated(settings) as url:
        done = asyncio.run(reindex(settings, url))
    print(json.dumps(done))
    return 0


def _bench(args: argparse.Namespace) -> int:
    """Wire the recall benchmark (memory/evaluation/) to the configured database and embedder."""
    import asyncio

    from api.embedders import build_embedder, embedder_server
    from api.recall_bench import ingest_as_chats
    from api.reindex import Progress
    from chat.store import PostgresChatStore
    from db.engine import create_engine
    from llm.tokens import TiktokenCounter
    from memory.evaluation.benchmark import Plan, run_recall_benchmark

    settings = Settings()
    plan = Plan(dataset=args.dataset, mode=args.mode, out=args.out, keep=args.keep,
                ablate=args.ablate)

    async def run(url: str) -> int:
        engine = create_engine(url, pool_size=2)
        server = embedder_server(settings)
        try:
            embedder, provider = build_embedder(settings, server)
            return await run_recall_benchmark(
                plan, engine, ingest_as_chats(PostgresChatStore(engine), TiktokenCounter()),
                embedder, provider.model, settings.recall_config(),
                lambda label, total: Progress(label, total, sys.stderr),
            )
        finally:
            if server is not None:
                await server.aclose()
            await engine.dispose()

    with _migrated(settings) as url:
        return asyncio.run(run(url))


def _import(args: argparse.Namespace) -> int:
    """Conversations from a file become chats of a user (api/history_import.py)."""
    import asyncio
    from pathlib import Path

    from api.history_import import lower_priority, run_import

    settings = Settings()
    path = Path(args.file)
    if not path.is_file():
        print(f"jin import: no such file: {path}", file=sys.stderr)
        return 2
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        print(f"jin import: {path} is not UTF-8 text", file=sys.stderr)
        return 2
    lower_priority(settings.import_nice)
    try:
        with _migrated(settings) as url:
            report = asyncio.run(run_import(
                settings, url, content, str(path), user=args.user, tenant=args.tenant,
                fmt=args.format, index=not args.no_index))
    except KeyboardInterrupt:  # (what was written is committed; claims are let go)
        print("\njin import: stopped. What it wrote is kept: run the same command again to go "
              "on where it stopped.", file=sys.stderr)
        return 130
    print(json.dumps(report.to_json(), indent=2))
    return 1 if report.bad_lines else 0


def _layers(text: str) -> tuple[str, ...]:
    try:
        return parse_layers(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _keys(args: argparse.Namespace) -> int:
    """Create, list or revoke API keys; a new key is printed once and never stored."""
    import asyncio

    from api.keys import BadKeyRequest, KeyStore
    from db.engine import create_engine

    async def run(url: str) -> int:
        engine = create_engine(url, pool_size=1)
        keys = KeyStore(engine)
        try:
            if args.keys == "create":
                key, secret = await keys.create(args.tenant, args.name, args.admin)
                print(json.dumps({**key.to_json(), "key": secret}, indent=2))
                print("Keep the key now: only its hash is stored.", file=sys.stderr)
            elif args.keys == "list":
                print(json.dumps([k.to_json() for k in await keys.list(args.tenant)], indent=2))
            else:
                print(json.dumps((await keys.revoke(args.key)).to_json(), indent=2))
        except BadKeyRequest as exc:
            print(f"jin keys: {exc}", file=sys.stderr)
            return 1
        finally:
            await engine.dispose()
        return 0

    with _migrated(Settings()) as url:
        return asyncio.run(run(url))


def _audit(args: argparse.Namespace) -> int:
    """Look for lost, duplicated or orphaned rows; exit 1 when there are any."""
    import asyncio

    from chat.audit import audit
    from db.engine import create_engine

    async def run(url: str) -> int:
        engine = create_engine(url, pool_size=1)
        try:
            result = await audit(engine)
        finally:
            await engine.dispose()
        print(json.dumps(result.to_json(), indent=2))
        return 0 if result.clean else 1

    with _migrated(Settings()) as url:
        return asyncio.run(run(url))


def _memory(args: argparse.Namespace) -> int:
    """`jin memory compress`: write time compression's summaries now (one pass, then the purge
    of expired sources), or with `--dry-run` show what it would merge."""
    import asyncio
    from datetime import UTC, datetime

    from api.embedders import build_embedder, embedder_server
    from db.engine import create_engine
    from llm.openai import OpenAIChatModel
    from llm.provider import Provider
    from memory.events.compression import Merge, plan
    from memory.events.compression_store import PostgresCompressionStore
    from memory.events.compressor import Compressor
    from memory.events.schema import load_schemas
    from memory.events.store import PostgresEventStore

    settings = Settings()

    def shown(n: int, total: int, merge: Merge, outcome: str) -> None:
        print(f"[{n}/{total}] {merge.owner[0]}/{merge.owner[1]} {merge.topic!r} {merge.level} "
              f"{merge.start.date()}: {len(merge.sources)} events {outcome}", file=sys.stderr)

    async def dry_run(store: PostgresCompressionStore) -> int:
        events = await store.dated(args.tenant, args.user)
        now = datetime.now(UTC)
        merges = plan(events, now)
        print(json.dumps({
            "now": now.isoformat(), "events": len(events),
            "would_merge": sum(len(m.sources) for m in merges), "summaries": len(merges),
            "merges": [{"owner": f"{m.owner[0]}/{m.owner[1]}", "topic": m.topic,
                        "level": m.level, "start": m.start.isoformat(),
                        "end": m.end.isoformat(), "sources": list(m.sources)}
                       for m in merges]}, indent=2))
        return 0

    async def run(url: str) -> int:
        engine = create_engine(url, pool_size=2)
        servers: list[Provider] = []
        try:
            store = PostgresCompressionStore(engine)
            if args.dry_run:
                return await dry_run(store)
            # The helper writes the summaries; without a helper server (the embedded model is
            # not started for this), each is its events' texts merged.
            configured = settings.provider("helper")
            helper = Provider(configured, settings.http_config()) if configured else None
            embedding = embedder_server(settings)
            servers += [s for s in (helper, embedding) if s is not None]
            embedder, provider = build_embedder(settings, embedding)
            if helper is None:
                print("jin memory compress: no helper server (JIN_HELPER_URL): each summary "
                      "is its events' texts merged", file=sys.stderr)
            compressor = Compressor(store, OpenAIChatModel(helper) if helper else None,
                                    embedder, provider.model, settings.compressor_config(),
                                    cards=PostgresEventStore(engine),
                                    schemas=load_schemas(settings.memory_schemas))
            done = await compressor.compress(args.tenant, args.user, progress=shown)
            print(json.dumps(done.to_json(), indent=2))
            return 0
        finally:
            for server in servers:
                await server.aclose()
            await engine.dispose()

    with _migrated(settings) as url:
        return asyncio.run(run(url))


def _chat(args: argparse.Namespace) -> int:
    """A terminal client of a running jin (api/terminal.py)."""
    from api.terminal import base_url, chat

    settings = Settings()
    base = (args.url or base_url(settings.host, settings.port)).rstrip("/")
    return chat(base, key=args.key or settings.api_key, user=args.user, system=args.system,
                chat_id=args.chat)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jin", description="a memory runtime for LLM chat")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="migrate, then serve the API (embedded defaults)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    serve.set_defaults(func=_serve)

    migrate = sub.add_parser("migrate", help="alembic upgrade head (or --downgrade REV)")
    migrate.add_argument("--revision", default="head")
    migrate.add_argument("--downgrade", metavar="REV")
    migrate.set_defaults(func=_migrate)

    reindex = sub.add_parser(
        "reindex", help="re-embed all messages and facts with the configured embedder"
    )
    reindex.set_defaults(func=_reindex)

    bench = sub.add_parser("bench", help="benchmarks that need the real write and recall paths")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    recall = bench_sub.add_parser("recall", help="Recall@k and NDCG@10 on a JSONL dataset")
    recall.add_argument("--dataset", required=True, help="JSONL: turns and questions")
    recall.add_argument("--mode", default="hybrid",
                        choices=["hybrid", "dense", "keyword", "all"])
    recall.add_argument("--out", help="write a run file: question_id and results per line")
    recall.add_argument("--keep", action="store_true", help="keep the ingested data")
    recall.add_argument("--ablate", type=_layers, default=(), metavar="LAYERS",
                        help="recall layers to switch off, one run each: a comma list of "
                             + ", ".join(LAYERS))
    recall.set_defaults(func=_bench)

    imports = sub.add_parser(
        "import", help="bring conversations from a file: jin JSONL, ChatGPT export, OpenAI")
    imports.add_argument("file", help="the file: jin's JSONL, a ChatGPT export's "
                                      "conversations.json, or OpenAI messages, a line each")
    imports.add_argument("--user", required=True, help="whose chats they become")
    imports.add_argument("--tenant", default="default")
    imports.add_argument("--format", choices=["jin", "chatgpt", "openai"],
                         help="the file's format (default: told from its start)")
    imports.add_argument("--no-index", action="store_true",
                         help="write only; serving workers index when their steps are quiet")
    imports.set_defaults(func=_import)

    keys = sub.add_parser("keys", help="API keys: create, list, revoke")
    keys_sub = keys.add_subparsers(dest="keys", required=True)
    create = keys_sub.add_parser("create", help="a new key for a tenant (printed once)")
    create.add_argument("--tenant", required=True)
    create.add_argument("--name", default="", help="what the key is for")
    create.add_argument("--admin", action="store_true", help="may read /metrics, /v1/status")
    listing = keys_sub.add_parser("list", help="keys (prefixes only, never secrets)")
    listing.add_argument("--tenant")
    revoke = keys_sub.add_parser("revoke", help="revoke a key by id or prefix")
    revoke.add_argument("key", help="the id or the prefix shown by `jin keys list`")
    keys.set_defaults(func=_keys)

    audit = sub.add_parser("audit", help="look for lost, duplicated or orphaned rows")
    audit.set_defaults(func=_audit)

    memory = sub.add_parser("memory", help="event memory: time compression")
    memory_sub = memory.add_subparsers(dest="memory", required=True)
    compress = memory_sub.add_parser(
        "compress", help="merge quiet topics' old events into summaries (the ladder: daily "
        "within a week, weekly within a month, monthly within a year, yearly after), then "
        "purge merged events whose TTL ran out")
    compress.add_argument("--dry-run", action="store_true",
                          help="show what would be merged, change nothing")
    compress.add_argument("--tenant", help="only this tenant's events")
    compress.add_argument("--user", help="only this user's events (with --tenant)")
    memory.set_defaults(func=_memory)

    chat = sub.add_parser("chat", help="talk to a running jin from the terminal")
    chat.add_argument("--url", help="jin's address (default: from JIN_HOST and JIN_PORT)")
    chat.add_argument("--key", help="an API key (default: JIN_API_KEY)")
    chat.add_argument("--chat", help="continue this chat id")
    chat.add_argument("--user", default="terminal-user")
    chat.add_argument("--system", default="You are a helpful assistant.")
    chat.set_defaults(func=_chat)

    args = parser.parse_args(argv)
    try:
        if args.command == "serve":
            settings = Settings()
            logs.configure(settings.log_level, settings.log_format)
        else:  # commands for people at a terminal: plain lines
            logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                                format="%(asctime)s %(levelname)s %(name)s %(message)s")
            # Not a dozen lines of Alembic's plugins before the work (its migrations are still
            # said), nor one of httpx's per request, nor the embedded Postgres's command lines
            # as it starts and stops (api/database.py says where it runs).
            for noisy in ("alembic.runtime.plugins", "httpx", "pgserver"):
                logging.getLogger(noisy).setLevel(logging.WARNING)
        return int(args.func(args))
    except ValidationError as exc:  # a bad JIN_* variable: say which, without a traceback
        for error in exc.errors():
            name = "JIN_" + "_".join(str(part) for part in error["loc"]).upper()
            print(f"jin: {name}: {error['msg']}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

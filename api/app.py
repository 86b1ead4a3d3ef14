"""create_app(settings): the composition root. Nothing is built at import time."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace

from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import docs, page, problems
from api.access import Access, RateLimiter, is_loopback
from api.app_banner import EMBEDDED_BANNER, OPEN_BANNER
from api.chat_feed import ChatFeed
from api.edge import Edge, declare_keys
from api.embedders import build_embedder, duplicate_cosine, embedder_server, served_dim
from api.keys import KeyStore
from api.metrics import Metrics
from api.openai_errors import OpenAIErrors
from api.role_status import RoleProbe
from api.routes import (
    chats,
    events,
    health,
    memories,
    messages,
    metrics,
    openai_compat,
    runtime_memory,
    runtime_patterns,
    snapshots,
    ws,
)
from api.runtime import Runtime
from api.settings import Settings
from chat.abort_channel import listen_for_aborts
from chat.channels import Channels
from chat.steps import PostgresStepStore
from chat.store import PostgresChatStore
from chat.sweeper import sweep_forever
from chat.transcript import PostgresTranscripts
from chat.window_cache import WindowCache
from db.engine import create_engine
from llm.batching import BatchedQueries
from llm.embedded import EmbeddedChatServer
from llm.errors import LLMError
from llm.openai import OpenAIChatModel, context_window_of
from llm.ports import ChatModel, Embedder, TokenEmbedder
from llm.provider import Provider
from llm.search import SearxngSearch, SerperSearch, WebSearch
from llm.tokens import TiktokenCounter
from llm.types import ProviderConfig
from memory.events.compression_store import PostgresCompressionStore
from memory.events.compressor import Compressor
from memory.events.extractor import Extracted, Extractor
from memory.events.listing import EventListing
from memory.events.schema import load_schemas
from memory.events.store import PostgresEventStore
from memory.indexer import Indexer
from memory.pattern_store import PostgresPatterns
from memory.recall_store import PostgresRecall
from memory.runtime_store import PostgresRuntimeMemory
from memory.snapshot_store import PostgresSnapshots
from memory.store import FactConfig, PostgresFactStore
from migrations.embedding_dim import current_dim
from orchestrator.actions import ActionConfig
from orchestrator.compaction_pass import Compactor
from orchestrator.compaction_policy import CompactionPolicy
from orchestrator.runtime_memory import RuntimeMemory
from orchestrator.runtime_patterns import RuntimePatterns
from orchestrator.snapshots import SessionSnapshots
from orchestrator.step import StepConfig, StepDeps
from orchestrator.translation import TranslatorConfig

log = logging.getLogger("jin")



def _step_config(settings: Settings, context_window: int | None) -> StepConfig:
    return StepConfig(
        context_window=context_window or settings.embedded_context_window,
        answer_reserve_tokens=settings.answer_reserve_tokens,
        tail_budget_ratio=settings.tail_budget_ratio,
        compact_trigger_ratio=settings.compact_trigger_ratio,
        max_message_chars=settings.max_message_chars,
        lease_ttl=settings.lease_ttl_seconds,
        queue_wait=settings.queue_wait_seconds,
        abort_poll=settings.abort_poll_seconds,
        partial_flush=settings.partial_flush_seconds,
        worker_id=f"{socket.gethostname()}:{os.getpid()}",
        memory_tools=settings.memory_tools,
        validator=settings.validator_config(),
        route=settings.route_config(),
        translator=TranslatorConfig(
            timeout=settings.translator_timeout_seconds,
            max_tokens=settings.translator_max_tokens or TranslatorConfig.max_tokens),
        actions=ActionConfig(max_repeats=settings.action_max_repeats,
                             max_actions=settings.action_max_per_answer,
                             results=settings.search_results),
    )


def _search(settings: Settings) -> WebSearch | None:
    """The web search provider: SearXNG by URL, else Serper by key, else none (the brain is
    not offered the tool, and a marker's search is FAILED)."""
    timeout = settings.search_timeout_seconds
    if settings.search_url:
        log.info("web search: SearXNG at %s", settings.search_url)
        return SearxngSearch(settings.search_url, timeout=timeout)
    if settings.serper_key:
        log.info("web search: Serper at %s", settings.serper_url)
        return SerperSearch(settings.serper_key, url=settings.serper_url, timeout=timeout)
    return None


class _Timing:
    """Stamps when a request arrived; JSON answers carry `Server-Timing: app;dur=<ms>`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = time.perf_counter()
        scope.setdefault("state", {})["received_at"] = arrived

        async def timed_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                duration = (time.perf_counter() - arrived) * 1000
                headers = list(message.get("headers", []))
                headers.append((b"server-timing", f"app;dur={duration:.3f}".encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, timed_send)


class _BodyLimit:
    """Refuse bodies over the limit by their Content-Length, before anything reads them."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            if length.isdigit() and int(length) > self.limit:
                await self._too_large(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        # No length (chunked): read the body here, up to the limit, then hand it on.
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, receive, send)  # the client left; let the app see it
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.limit:
                await self._too_large(scope, receive, send)
                return
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = problems.problem_response(
            413, "request_too_large", f"the body is over {self.limit} bytes")
        await answer(scope, receive, send)


async def _discover_window(server: Provider) -> ProviderConfig:
    """The brain's context window from its server's `/models`, where it says; else the default."""
    config = server.config
    try:
        models = await asyncio.wait_for(OpenAIChatModel(server).list_models(), 5)
    except (LLMError, TimeoutError) as exc:
        log.warning("could not read %s/models (%s); using the default context window",
                    config.base_url, exc)
        return config
    window = context_window_of(models, config.model)
    if window:
        log.info("brain context window from /models: %d tokens", window)
        return replace(config, context_window=window)
    return config


@dataclass(frozen=True)
class _Memory:
    provider: ProviderConfig
    facts: PostgresFactStore | None
    recall: PostgresRecall | None
    indexer: Indexer | None
    problem: str | None  # why memory is off, when it is
    embedder: Embedder | None = None
    warning: str | None = None  # what memory lacks while on (vectors of another embedder)


# The vectors of a sample of the stored messages and facts (the first rows each table reads):
# how many another model made. One model at a time writes a deployment's vectors, so a sample
# tells a change of embedder without reading every row at each start.
_OTHER_VECTORS = text("""
SELECT count(*) FILTER (WHERE embedder <> :name) AS other, count(*) AS seen FROM (
    (SELECT embedder FROM message_embeddings WHERE embedder IS NOT NULL LIMIT 1000)
    UNION ALL (SELECT embedder FROM memories WHERE embedder IS NOT NULL LIMIT 1000)) s""")


async def _other_vectors(db: AsyncEngine, name: str) -> str | None:
    """What to say when stored vectors are another embedder's (the same dimension, so nothing
    else tells): recall by meaning cannot compare them with this one's questions."""
    async with db.connect() as conn:
        other, seen = (await conn.execute(_OTHER_VECTORS, {"name": name})).one()
    if not other:
        return None
    return (f"{other} of {seen} stored vectors sampled were made by another embedder than "
            f"{name}: recall by meaning misses them until `jin reindex` re-embeds them")


async def _memory(
    settings: Settings, db: AsyncEngine, server: Provider | None, counter: TiktokenCounter,
) -> _Memory:
    """The embedder, the fact store, recall and the indexer; all off, loudly, when the
    database's vectors do not have the embedder's dimension (`jin reindex` fixes that)."""
    embedder, provider = build_embedder(settings, server)
    async with db.connect() as conn:
        stored = await conn.run_sync(current_dim)
    served = await served_dim(server)
    if served is not None and served != embedder.dim:
        problem = (
            f"the embedder {provider.model} returns {served}-dimensional vectors, not "
            f"JIN_EMBEDDING_DIM={embedder.dim}: set JIN_EMBEDDING_DIM={served} and run "
            "`jin reindex`"
        )
        log.error("memory is OFF: %s", problem)
        return _Memory(provider, None, None, None, problem)
    if embedder.dim != stored:
        problem = (
            f"the database holds {stored}-dimensional vectors and the embedder "
            f"{provider.model} makes {embedder.dim}: run `jin reindex` to re-embed with it"
        )
        log.error("memory is OFF: %s", problem)
        return _Memory(provider, None, None, None, problem)
    facts = PostgresFactStore(db, embedder, provider.model,
                              FactConfig(duplicate_cosine=duplicate_cosine(settings),
                                         ann_from=settings.recall_ann_from))
    recall_config = settings.recall_config()
    # Steps running at once share their queries' requests to the embedder (llm/batching.py).
    queries = BatchedQueries(embedder, in_flight=settings.recall_query_requests)
    recall = PostgresRecall(db, queries, counter.count, recall_config,
                            embedder_name=provider.model, ann_from=settings.recall_ann_from,
                            token_embedder=embedder if isinstance(embedder, TokenEmbedder)
                            else None) if recall_config.enabled else None
    indexer = Indexer(db, embedder, provider.model, settings.indexer_config())
    log.info("memory: embedder %s (%d dims), recall %s", provider.model, embedder.dim,
             recall_config.mode if recall else "off")
    if recall_config.rerank and not isinstance(embedder, TokenEmbedder):
        log.warning("JIN_RECALL_RERANK needs token vectors, which only the built-in MiniLM "
                    "gives (JIN_EMBEDDER=minilm): %s gives none, so events are not reranked",
                    provider.model)
    warning = await _other_vectors(db, provider.model)
    if warning is not None:
        log.warning("memory: %s", warning)
    return _Memory(provider, facts, recall, indexer, None, embedder, warning)


def _extractor(settings: Settings, engine: AsyncEngine, memory: _Memory, helper: ChatModel,
               meter: Metrics) -> Extractor | None:
    """Event and entity extraction in the background, when on and memory is (it embeds)."""
    if not settings.events_on() or memory.embedder is None:
        return None

    def counted(done: Extracted) -> None:
        if done.called:
            meter.extraction_batches.labels("empty" if done.empty else "kept").inc()
        else:
            meter.extraction_batches.labels("filler").inc()
        for reason, count in done.drops.items():
            meter.extraction_dropped.labels(reason).inc(count)

    return Extractor(PostgresEventStore(engine), helper, memory.embedder, memory.provider.model,
                     load_schemas(settings.memory_schemas), settings.extractor_config(),
                     on_extracted=counted)


def _compressor(settings: Settings, engine: AsyncEngine, memory: _Memory, helper: ChatModel,
                extractor: Extractor | None) -> Compressor | None:
    """TIME_COMPRESS with event memory: summaries by the helper, embedded for recall."""
    if extractor is None or memory.embedder is None:
        return None
    return Compressor(PostgresCompressionStore(engine), helper, memory.embedder,
                      memory.provider.model, settings.compressor_config(),
                      cards=extractor.store, schemas=extractor.schemas)


def _roles(settings: Settings) -> tuple[ProviderConfig, ProviderConfig,
                                         EmbeddedChatServer | None]:
    """Brain and helper: the configured servers, or the embedded model (started here). With
    JIN_HELPER_AS_BRAIN the helper's server is the brain's too."""
    embedded: EmbeddedChatServer | None = None
    brain, helper = settings.provider("brain"), settings.provider("helper")
    if brain is None or helper is None:
        embedded = EmbeddedChatServer(
            threads=settings.embedded_model_threads,
            context_window=settings.embedded_context_window,
        )
        local = embedded.start()
        brain = brain or replace(local, role="brain", **settings.generation("brain"))
        helper = helper or replace(local, role="helper", **settings.generation("helper"))
    if brain.embedded:
        log.warning(EMBEDDED_BANNER)
    log.info("brain: %s at %s%s", brain.model, brain.base_url,
             " (the helper's server)" if brain.served_by else "")
    log.info("helper: %s at %s", helper.model, helper.base_url)
    if helper.embedded and not settings.runtime_memory_on():
        log.info("L1 runtime memory is off with the embedded helper (JIN_RUNTIME_MEMORY=true "
                 "turns it on, at ~10 s of the model's thread a turn)")
    return brain, helper, embedded


async def _access(settings: Settings, engine: AsyncEngine) -> Access:
    """Keys from the database; until the first is made, open on loopback only (loudly), else
    no start."""
    keys = KeyStore(engine)
    access = Access(keys, open_allowed=is_loopback(settings.host),
                    cache_seconds=settings.auth_cache_seconds)
    if await keys.ever_made():
        log.info("API keys required (Authorization: Bearer <key>)")
    elif access.open_allowed:
        log.warning(OPEN_BANNER)
    else:
        message = (f"no API key exists and jin is bound to {settings.host}, not a loopback "
                   "address: create one with `jin keys create --tenant <tenant>` first")
        log.error(message)
        raise RuntimeError(message)
    return access


def create_app(settings: Settings, on_shutdown: Callable[[], None] | None = None) -> FastAPI:
    if not settings.database_url:
        raise ValueError("create_app needs settings.database_url (jin serve resolves it)")
    meter = Metrics(settings.prometheus_multiproc_dir)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One pool for the worker: chats and memory alike (as many connections as the three
        # pools it replaced had: settings.py).
        engine = create_engine(settings.database_url or "", pool_size=(
            settings.db_pool_size + 2 * max(2, settings.db_pool_size // 4)))
        try:  # who may call comes first: a start that must be refused refuses at once
            app.state.access = await _access(settings, engine)
        except BaseException:
            await engine.dispose()
            raise
        brain, helper, embedded = _roles(settings)
        # Each model server its own client: its own pool, limits and timeouts.
        servers = {"brain": Provider(brain, settings.http_config()),
                   "helper": Provider(helper, settings.http_config())}
        if (translator := settings.provider("translator")) is not None:
            servers["translator"] = Provider(translator, settings.http_config())
            log.info("translator: %s at %s (Cyrillic input %s)", translator.model,
                     translator.base_url,
                     "translated" if settings.translates_input() else "not translated")
        if (embedding := embedder_server(settings)) is not None:
            servers["embedder"] = embedding
        if not brain.embedded and brain.context_window is None:
            brain = await _discover_window(servers["brain"])
        # The rows of the windows this worker read, which its next reads need not fetch again.
        windows = WindowCache(max_chars=settings.window_cache_chars)
        chats, counter = PostgresChatStore(engine, windows), TiktokenCounter()
        memory = await _memory(settings, engine, servers.get("embedder"), counter)
        compactor = Compactor(
            chats=chats,
            helper=OpenAIChatModel(servers["helper"]),
            helper_model=helper.model,
            counter=counter,
            facts=memory.facts,
            indexer=memory.indexer,
            policy=CompactionPolicy(
                trigger_ratio=settings.compact_trigger_ratio,
                target_ratio=settings.compact_target_ratio,
            ),
        ) if settings.compaction else None
        steps = PostgresStepStore(engine, windows)
        search = _search(settings)
        l1 = RuntimeMemory(
            store=PostgresRuntimeMemory(engine),
            helper=OpenAIChatModel(servers["helper"]),
            counter=counter,
            config=settings.runtime_memory_config(),
            on_rejected=lambda reason: meter.runtime_memory_rejections.labels(reason).inc(),
            listeners=[lambda _event: meter.runtime_memory_updates.inc()],
        ) if settings.runtime_memory_on() else None
        l2 = RuntimePatterns(
            store=PostgresPatterns(engine), turns=l1.store, helper=l1.helper, counter=counter,
            config=settings.patterns_config(),
            on_written=meter.runtime_patterns_updates.inc,
            on_rejected=lambda reason: meter.runtime_patterns_rejections.labels(reason).inc(),
            on_alert=lambda kind: meter.runtime_memory_alerts.labels(kind).inc(),
        ) if l1 is not None and settings.l2_enabled else None
        l3 = SessionSnapshots(
            store=PostgresSnapshots(engine),
            l1=l1.store,
            helper=l1.helper,
            counter=counter,
            config=settings.snapshot_config(),
            runtime=l1,
            patterns=l2.for_snapshot if l2 is not None else None,  # L1 -> (L2) -> L3
            on_saved=lambda s: meter.snapshots.labels(s.via, s.digest_source).inc(),
        ) if l1 is not None and settings.session_snapshots else None
        deps = StepDeps(
            chats=chats,
            steps=steps,
            brain=OpenAIChatModel(servers["brain"]),
            counter=counter,
            config=_step_config(settings, brain.context_window),
            compactor=compactor,
            recall=memory.recall,
            facts=memory.facts,
            indexer=memory.indexer,
            translator=(OpenAIChatModel(servers["translator"])
                        if "translator" in servers else None),
            search=search,
            runtime_memory=l1,
            runtime_patterns=l2,
            snapshots=l3,
        )
        extractor = _extractor(settings, engine, memory, OpenAIChatModel(servers["helper"]),
                               meter)
        compressor = _compressor(settings, engine, memory, OpenAIChatModel(servers["helper"]),
                                 extractor)
        runtime = Runtime(
            engine=engine, deps=deps, extractor=extractor, event_listing=EventListing(engine),
            compressor=compressor,
            providers={"brain": brain, "helper": helper,
                       **({"translator": translator} if translator is not None else {}),
                       "embedder": memory.provider},
            probe=RoleProbe(servers),
            metrics=meter, memory_problem=memory.problem, memory_warning=memory.warning,
            transcripts=PostgresTranscripts(engine), indexer=memory.indexer,
        )
        app.state.runtime = runtime
        # What startup built (tokenizer tables, routes, models, pools) lives as long as the
        # worker: moved out of the collector's sight, a full collection walks only what steps
        # allocate since (a full pass over the startup heap took ~60 ms; worker CPU per step
        # -9% at 32 concurrent chats, bench/README.md).
        gc.collect()
        gc.freeze()
        # The youngest generation is collected every 5,000 new objects, not 700: at 32
        # concurrent chats a collection came every other step and promoted every step in
        # flight, which the next generation then walked again. Collector time a step
        # 0.41 -> 0.14 ms; the longest pause 10.8 -> 11.7 ms (bench/HISTORY.md, session 7).
        gc.set_threshold(5_000, 10, 10)
        # One LISTEN connection for the worker: aborts, and the chats its sockets follow.
        channels = Channels(settings.database_url or "")
        listen_for_aborts(channels, runtime.abort_local)
        await channels.start()
        runtime.feed = ChatFeed(channels)
        await runtime.feed.start()
        if l1 is not None:  # an L1 update that outlived its step goes to the chat's sockets
            feed = runtime.feed
            l1.listeners.append(lambda event: feed.publish(event.chat_id, event))
        if l2 is not None:  # so does an L2 pass
            l2.listeners.append(lambda event: feed.publish(event.chat_id, event))
        indexing = asyncio.create_task(memory.indexer.run()) if memory.indexer else None
        extracting = asyncio.create_task(extractor.run()) if extractor else None
        compressing = asyncio.create_task(compressor.run()) if (
            compressor and compressor.config.interval_seconds > 0) else None
        # Steps whose worker died are closed even if nobody steps on their chat again.
        sweeping = asyncio.create_task(sweep_forever(steps, every=settings.lease_ttl_seconds))
        try:
            yield
        finally:
            sweeping.cancel()
            await asyncio.gather(sweeping, return_exceptions=True)
            for worker in (indexing, extracting, compressing):
                if worker is not None:
                    worker.cancel()
                    await asyncio.gather(worker, return_exceptions=True)
            await runtime.feed.stop()
            await channels.stop()
            await runtime.drain()
            if l1 is not None:
                await l1.drain()
            if l2 is not None:
                await l2.drain()
            for server in servers.values():
                await server.aclose()
            if search is not None:
                await search.aclose()
            await engine.dispose()
            if embedded is not None:
                embedded.stop()
            if on_shutdown is not None:
                on_shutdown()

    # The reference pages are api/docs.py's, with their assets served here (no CDN).
    app = FastAPI(title="jin", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    docs.install(app)
    page.install(app)  # the web page at /, api/page.py
    app.state.settings = settings
    app.state.metrics = meter
    # Outermost last: timing, then the edge (ids, key, limits), then the body limit.
    app.add_middleware(_BodyLimit, limit=settings.max_request_bytes)
    app.state.limiter = RateLimiter(settings.rate_limit_per_minute, settings.rate_limit_burst)
    app.add_middleware(
        Edge, metrics=meter, max_steps=settings.max_concurrent_steps,
        limiter=app.state.limiter)
    app.add_middleware(_Timing)
    app.add_middleware(OpenAIErrors)  # outermost: it sees the edge's refusals too
    problems.install(app)
    declare_keys(app)
    app.include_router(health.router)
    app.include_router(chats.router)
    app.include_router(messages.router)
    app.include_router(memories.router)
    app.include_router(events.router)
    app.include_router(runtime_memory.router)
    app.include_router(runtime_patterns.router)
    app.include_router(snapshots.router)
    app.include_router(metrics.router)
    app.include_router(openai_compat.router)
    app.include_router(ws.router)
    return app


def app_from_env() -> FastAPI:
    """The app of one worker process of `jin serve --workers N` (uvicorn's factory)."""
    return create_app(Settings())

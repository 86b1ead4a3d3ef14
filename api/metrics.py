"""Prometheus metrics of one worker, fed by the edge (requests) and by the step's own events.

Under `jin serve --workers N` every worker writes to PROMETHEUS_MULTIPROC_DIR (the CLI sets
it) and `/metrics` on any of them sums them all; the running-steps gauge of a worker that died
(uvicorn starts another) is dropped when the next one starts.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from api.database import pid_alive
from orchestrator.events import (
    CompactionDone,
    MessageEnd,
    MessageError,
    RuntimeMemoryUpdate,
    StepEnd,
    StepEvent,
)

# A step waits on a model: seconds to minutes. The server's own share: milliseconds.
_STEP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class Metrics:
    def __init__(self, multiprocess_dir: Path | None = None) -> None:
        self.multiprocess_dir = multiprocess_dir
        if multiprocess_dir is not None:
            _forget_dead_workers(multiprocess_dir)
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("jin_http_requests", "HTTP requests answered",
                                ["method", "route", "status"], registry=r)
        self.request_seconds = Histogram(
            "jin_http_request_seconds", "Time to answer a request (to the end of a stream)",
            ["method", "route"], buckets=_STEP_BUCKETS, registry=r)
        self.step_seconds = Histogram("jin_step_seconds", "Steps, from request to the end",
                                      ["status"], buckets=_STEP_BUCKETS, registry=r)
        self.step_overhead = Histogram(
            "jin_step_overhead_seconds", "The server's own time per step (all but the model's)",
            buckets=_FAST_BUCKETS, registry=r)
        self.recall_seconds = Histogram("jin_recall_seconds", "Recall per step, query vector "
                                        "included", buckets=_FAST_BUCKETS, registry=r)
        self.tokens = Counter("jin_tokens", "Model tokens, as the provider counted them",
                              ["direction"], registry=r)
        self.compactions = Counter("jin_compactions", "Compaction passes by result",
                                   ["result"], registry=r)
        self.provider_errors = Counter("jin_provider_errors", "Failed model calls in steps",
                                       ["code"], registry=r)
        self.steps_running = Gauge("jin_steps_running", "Steps this worker runs now",
                                   registry=r, multiprocess_mode="livesum")
        self.rate_limited = Counter("jin_rate_limited", "Requests refused by the rate limit",
                                    registry=r)
        self.runtime_memory_updates = Counter(
            "jin_runtime_memory_updates", "New versions of L1 runtime memory", registry=r)
        self.runtime_memory_rejections = Counter(
            "jin_runtime_memory_rejections", "L1 updates rejected (the state stayed), by reason",
            ["reason"], registry=r)
        self.runtime_patterns_updates = Counter(
            "jin_runtime_patterns_updates", "New versions of L2 pattern memory", registry=r)
        self.runtime_patterns_rejections = Counter(
            "jin_runtime_patterns_rejections", "L2 distillations rejected, by reason",
            ["reason"], registry=r)
        self.runtime_memory_alerts = Counter(
            "jin_runtime_memory_alerts", "Alerts L2 recorded about L1 (stale_l1), by type",
            ["type"], registry=r)
        self.snapshots = Counter(
            "jin_snapshots", "L3 session snapshots saved, by how (route, tool_call, marker) and "
            "who wrote the digest (helper, or fallback: jin, from the L1 lines)",
            ["via", "digest"], registry=r)
        self.extraction_batches = Counter(
            "jin_extraction_batches", "Batches of turns extracted, by result: kept (something "
            "was), empty (content, yet nothing kept), filler (no helper call)", ["result"],
            registry=r)
        self.extraction_dropped = Counter(
            "jin_extraction_dropped", "Items of the helper's extractions dropped, by reason",
            ["reason"], registry=r)
        self.auth_failures = Counter("jin_auth_failures", "Requests refused for their key",
                                     ["code"], registry=r)

    def observe(self, event: StepEvent) -> None:
        """Count what a step's event says; called for every event the step yields."""
        if isinstance(event, StepEnd):
            timings = event.timings
            if "total_ms" in timings:
                self.step_seconds.labels(event.status).observe(timings["total_ms"] / 1000)
            if "overhead_ms" in timings:
                self.step_overhead.observe(timings["overhead_ms"] / 1000)
            if timings.get("recall_ms"):  # zero: recall is off
                self.recall_seconds.observe(timings["recall_ms"] / 1000)
        elif isinstance(event, MessageEnd) and event.usage:
            self.tokens.labels("in").inc(event.usage.get("prompt_tokens") or 0)
            self.tokens.labels("out").inc(event.usage.get("completion_tokens") or 0)
        elif isinstance(event, MessageError) and event.code.startswith("provider_"):
            self.provider_errors.labels(event.code).inc()
        elif isinstance(event, RuntimeMemoryUpdate):
            self.runtime_memory_updates.inc()
        elif isinstance(event, CompactionDone):
            result = "skipped" if event.skipped else "fallback" if event.fallback else "summary"
            self.compactions.labels(result).inc()

    def exposition(self) -> tuple[bytes, str]:
        if self.multiprocess_dir is not None:
            combined = CollectorRegistry()
            multiprocess.MultiProcessCollector(combined)  # type: ignore[no-untyped-call]
            return generate_latest(combined), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _forget_dead_workers(directory: Path) -> None:
    """A worker killed mid-step leaves its live gauge file behind: drop those of dead pids."""
    for path in directory.glob("gauge_live*_*.db"):
        pid = path.stem.rpartition("_")[2]
        if pid.isdigit() and not pid_alive(int(pid)):
            multiprocess.mark_process_dead(  # type: ignore[no-untyped-call]
                int(pid), str(directory))


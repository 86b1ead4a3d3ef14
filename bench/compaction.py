"""Compaction on a synthetic 2,000-turn conversation with tool calls.

Runs the real step (orchestrator.run_step) against real Postgres, with in-process models: the
brain echoes, the helper merges faithfully but drops 20% of its lines at random (verification
must put them back). Every third turn adds a tool call with a 200-line result; every tenth turn
plants a fact (an identifier and an amount).

    .venv/bin/python bench/compaction.py [--turns 2000]

Prints: tokens sent per step against resending the whole history (ratio), the largest prompt
against the budget, compaction passes and helper calls per 100 turns, fact retention at the
end, and what the cheap pre-pass alone saves on the tool-heavy transcript.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import text  # noqa: E402

from bench.harness import database  # noqa: E402
from chat.ports import NewChat  # noqa: E402
from chat.steps import PostgresStepStore  # noqa: E402
from chat.store import PostgresChatStore  # noqa: E402
from chat.testing import append_rows  # noqa: E402
from chat.types import MESSAGE_OVERHEAD, ModelSettings  # noqa: E402
from db.engine import create_engine  # noqa: E402
from llm.onnx_embedder import OnnxMiniLM  # noqa: E402
from llm.tokens import TiktokenCounter  # noqa: E402
from llm.types import CompletionRequest, ContentDelta, Delta, Finish  # noqa: E402
from memory.store import PostgresFactStore  # noqa: E402
from orchestrator.compaction_pass import Compactor  # noqa: E402
from orchestrator.compaction_policy import SECTIONS  # noqa: E402
from orchestrator.events import CompactionDone  # noqa: E402
from orchestrator.prepass import prepass  # noqa: E402
from orchestrator.step import (  # noqa: E402
    AbortSignal,
    StepConfig,
    StepDeps,
    StepRequest,
    run_step,
    start_step,
)

COUNTER = TiktokenCounter()
LOG = "\n".join(f"test_{i:03d} ... ok ({i * 7 % 90} ms)" for i in range(200))


class EchoBrain:
    async def stream(self, request: CompletionRequest) -> AsyncIterator[Delta]:
        last = request.messages[-1].content
        yield ContentDelta(f"Understood: {last[:200]}")
        yield Finish("stop")


class LossyHelper:
    """Merges the previous summary and the new messages into Facts, dropping 20% of lines."""

    def __init__(self, drop: float = 0.2) -> None:
        self.random, self.drop, self.calls = random.Random(42), drop, 0

    async def stream(self, request: CompletionRequest) -> AsyncIterator[Delta]:
        self.calls += 1
        prompt = request.messages[-1].content
        prev = re.search(r"<previous-summary>\n(.*?)\n</previous-summary>", prompt, re.S)
        msgs = re.search(r"<messages>\n(.*?)\n</messages>", prompt, re.S)
        lines = [ln for ln in (prev.group(1) if prev else "").splitlines()
                 if ln.startswith("- ") and ln != "- (none)"]
        lines += [f"- {ln[:160]}" for ln in (msgs.group(1) if msgs else "").splitlines()
                  if "[tool" not in ln and ("Note:" in ln or "?" in ln)]
        kept = [ln for ln in lines if self.random.random() >= self.drop]
        body = {s: ["- (none)"] for s in SECTIONS}
        body["Facts"] = kept or ["- (none)"]
        yield ContentDelta("\n\n".join(f"## {s}\n" + "\n".join(v) for s, v in body.items()))
        yield Finish("stop")


def tool_exchange(n: int) -> list[tuple[str, str, dict, int]]:
    call_id = f"call_{n}"
    args = json.dumps({"cmd": "pytest -q", "cwd": f"/srv/app{n % 5}"})
    call = {"id": call_id, "type": "function", "function": {"name": "shell", "arguments": args}}
    result = LOG if n % 2 else LOG + f"\nrun {n}: 200 passed"
    return [
        ("assistant", "", {"tool_calls": [call]}, COUNTER.count(args)),
        ("tool", result, {"tool_call_id": call_id, "name": "shell"}, COUNTER.count(result)),
    ]


async def run(turns: int, db_url: str) -> None:
    engine = create_engine(db_url, pool_size=4)
    chats, steps = PostgresChatStore(engine), PostgresStepStore(engine)
    helper = LossyHelper()
    embedder = OnnxMiniLM()
    deps = StepDeps(
        chats=chats, steps=steps, brain=EchoBrain(), counter=COUNTER,
        config=StepConfig(context_window=8192, answer_reserve_tokens=1024),
        compactor=Compactor(chats, helper, "lossy-helper", COUNTER,
                            facts=PostgresFactStore(engine, embedder, embedder.name)),
    )
    chat = await chats.create_chat(NewChat(
        "bench", "u", "bench", "You are a coding assistant.", ModelSettings(), "queue"))
    planted: list[str] = []
    sent, full, largest, passes = 0, 0, 0, 0
    history_tokens = COUNTER.count(chat.system_prompt) + MESSAGE_OVERHEAD
    started_at = time.perf_counter()
    for n in range(turns):
        question = f"Step {n}: please continue with the refactor of module m{n % 40}."
        if n % 10 == 0:
            code = f"PRJ-{n:04d}"
            planted.append(code)
            question = f"Note: project {code} has a budget of {n * 13 + 100} EUR. " + question
        started = await start_step(deps, StepRequest("bench", chat.id, question))
        plan = started.plan  # type: ignore[union-attr]
        async for event in run_step(deps, started, AbortSignal()):  # type: ignore[arg-type]
            if isinstance(event, CompactionDone) and not event.skipped:
                passes += 1
            if event.type == "context":
                prompt_tokens = event.total_tokens  # type: ignore[union-attr]
        answer_tokens = COUNTER.count(f"Understood: {question[:200]}")
        history_tokens += COUNTER.count(question) + answer_tokens + 2 * MESSAGE_OVERHEAD
        sent += prompt_tokens
        full += history_tokens
        largest = max(largest, prompt_tokens, plan.total_tokens)
        if n % 3 == 2:
            rows = tool_exchange(n)
            await append_rows(engine, chat.id, rows)
            history_tokens += sum(t + MESSAGE_OVERHEAD for *_, t in rows)
        if (n + 1) % 500 == 0:
            print(f"  {n + 1} turns, {passes} passes, {time.perf_counter() - started_at:.0f} s",
                  flush=True)

    budget = deps.config.context_window - deps.config.answer_reserve_tokens
    summary, after = await chats.read_span(chat, 500)
    async with engine.connect() as conn:
        facts = "\n".join((await conn.execute(text(
            "SELECT text FROM memories WHERE tenant_id = 'bench'"))).scalars())
    visible = (summary.content if summary else "") + "\n".join(m.content for m in after) + facts
    kept = [c for c in planted if c in visible]
    print(f"\n{turns} turns, budget {budget} tokens (window 8192 - reserve 1024)")
    print(f"tokens sent over all steps: {sent:,} against {full:,} resending the "
          f"whole history: ratio {sent / full:.4f} ({full / sent:.0f}x fewer)")
    print(f"largest prompt: {largest:,} tokens (budget {budget:,}; "
          f"{'within' if largest <= budget else 'OVER'} budget)")
    print(f"compaction passes per 100 turns: {passes / turns * 100:.2f}; helper calls per 100 "
          f"turns: {helper.calls / turns * 100:.2f}")
    print(f"fact retention: {len(kept)}/{len(planted)} = {len(kept) / len(planted):.2%} "
          f"(in the summary, the rows after it, or durable facts)")

    # The pre-pass alone, on the whole tool-heavy transcript (newest 20 rows protected).
    page = await chats.list_messages("bench", chat.id, before=None, after=None, limit=200)
    rows = []
    cursor = None
    while page and page.messages:
        rows += [m for m in page.messages if m.kind != "summary"]
        cursor = page.messages[-1].position
        if not page.has_more:
            break
        page = await chats.list_messages("bench", chat.id, before=None, after=cursor, limit=200)
    raw = sum(m.token_count + MESSAGE_OVERHEAD for m in rows)
    cheap = sum(m.token_count + MESSAGE_OVERHEAD for m in prepass(rows, 20, COUNTER))
    print(f"pre-pass alone on the transcript ({len(rows):,} rows): {raw:,} -> {cheap:,} tokens "
          f"({1 - cheap / raw:.1%} saved)")
    await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    with ExitStack() as stack:
        db_url = database(stack)
        asyncio.run(run(args.turns, db_url))


if __name__ == "__main__":
    main()

"""Compaction through the API: the window stays within budget and facts survive."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from chat.audit import audit
from llm.testing import FakeOpenAIServer, Reply
from orchestrator.compaction_policy import SECTIONS
from tests.api.sse_client import history, new_chat, stream_step

SMALL = {"context_window": 1800, "max_answer_tokens": 1000, "tail_budget_tokens": 200}
FILLER = " ".join(f"detail{i % 13}" for i in range(40))


def summary_reply(facts: list[str]) -> Reply:
    body = {s: ["- (none)"] for s in SECTIONS}
    body["Facts"] = [f"- {f}" for f in facts]
    return Reply(["\n\n".join(f"## {s}\n" + "\n".join(v) for s, v in body.items())])


async def test_a_long_chat_compacts_after_the_answer_and_keeps_what_the_helper_dropped(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
    engine: AsyncEngine,
) -> None:
    chat_id = await new_chat(client, settings=SMALL)
    facts = [f"Room {100 + i} has code K{7000 + i}." for i in range(12)]
    helper.push(summary_reply(facts[:2]))  # a lossy helper: keeps only two of the facts
    compactions = []
    for fact in facts:
        model.push(Reply([f"Noted: {fact}"]))
        events = await stream_step(client, chat_id, f"Remember this. {fact} {FILLER}")
        names = [n for n, _ in events]
        assert names[-1] == "step_end"
        if "compaction" in names:
            # After the answer is complete, before the step ends.
            assert names.index("compaction") > names.index("message_end")
            compactions.append(dict(events)["compaction"])
            break
    assert compactions, "the chat should have compacted by now"
    done = compactions[0]
    assert done["skipped"] is False and done["fallback"] is False
    assert done["tokens_after"] < done["tokens_before"]
    assert done["coverage"] == 1.0  # after verification: in the summary or in memory

    rows = await history(client, chat_id)
    summaries = [r for r in rows if r["kind"] == "summary"]
    first = summaries[0]
    report = first["meta"]["verification"]
    assert report["summary_coverage"] < 1.0  # the helper dropped facts...
    covered_turns = [r for r in rows if r["kind"] == "user"
                     and r["position"] <= first["meta"]["covers"][1]]
    assert covered_turns
    async with engine.connect() as conn:
        stored = (await conn.execute(text(
            "SELECT text FROM memories WHERE tenant_id = 'default' AND user_id = 'u1'"
        ))).scalars().all()
    for row in covered_turns:  # ...and what it dropped was put back: summary or memory
        code = next(w for w in row["content"].split() if w.startswith("K")).rstrip(".")
        assert code in first["content"] or any(code in f for f in stored)
    assert first["meta"]["helper_model"] == "fake"
    # The summary sits right after the last message it covers, and the history keeps all rows.
    covered = next(r for r in rows if r["position"] == first["meta"]["covers"][1])
    assert first["position"] == covered["position"] + 1
    turns = len([r for r in rows if r["kind"] == "user"])
    assert len([r for r in rows if r["kind"] != "summary"]) == 2 * turns

    # Every message the summary covers was indexed for recall before it left the window.
    assert first["meta"]["indexed"] is True
    span_ids = [r["id"] for r in rows if r["kind"] in ("user", "assistant")
                and r["position"] <= first["meta"]["covers"][1]]
    async with engine.connect() as conn:
        embedded = (await conn.execute(text(
            "SELECT count(*) FROM message_embeddings WHERE message_id::text = ANY(:ids) "
            "AND embedding IS NOT NULL"
        ), {"ids": span_ids})).scalar()
    assert embedded == len(span_ids)

    # The memory flush wrote the summary's facts as durable facts of this user, once each.
    assert {f"Room {100 + i} has code K{7000 + i}." for i in range(2)} <= set(stored)
    assert len(stored) == len(set(stored))

    # The next prompt: system, first exchange, the summary, then what came after it.
    context = (await client.get(f"/v1/chats/{chat_id}/context")).json()
    assert context["total_tokens"] <= context["budget"]["total"]
    names = [s["name"] for s in context["sections"] if s["messages"]]
    assert names[:3] == ["system", "head", "summary"]


async def test_with_the_helper_down_an_extractive_summary_is_written(
    jin_factory: Callable[..., str], model: FakeOpenAIServer, helper: FakeOpenAIServer,
    engine: AsyncEngine,
) -> None:
    async with httpx.AsyncClient(base_url=jin_factory(), timeout=30) as client:
        chat_id = await new_chat(client, settings=SMALL)
        helper.push(Reply(status=503, error="helper down"))  # then it backs off
        compacted = None
        for i in range(12):
            model.push(Reply([f"ok {i}"]))
            message = f"Invoice INV-{5000 + i} is due 2026-0{i % 9 + 1}-15. {FILLER}"
            events = await stream_step(client, chat_id, message)
            compacted = dict(events).get("compaction")
            if compacted:
                break
        assert compacted is not None and compacted["fallback"] is True
        summary = next(r for r in await history(client, chat_id) if r["kind"] == "summary")
        assert summary["meta"]["fallback"] is True and summary["meta"]["helper_model"] is None
        assert summary["meta"]["verification"]["coverage"] == 1.0
        async with engine.connect() as conn:
            stored = "\n".join((await conn.execute(text("SELECT text FROM memories"))).scalars())
        for item in ("INV-5000", "2026-01-15", "INV-5001"):
            assert item in summary["content"] or item in stored
    result = await audit(engine)  # nothing lost or orphaned by the fallback
    assert result.clean, result.findings()


async def test_a_compaction_lost_with_its_worker_is_done_by_the_next_step_before_the_brain(
    client: httpx.AsyncClient, model: FakeOpenAIServer, helper: FakeOpenAIServer,
    engine: AsyncEngine,
) -> None:
    """History that outgrew the window with no summary (the worker that should have compacted
    it died): the next step compacts first, so no message leaves the window unsummarised."""
    import uuid

    from chat.testing import seed_history

    chat_id = await new_chat(client, settings=SMALL)
    await seed_history(engine, uuid.UUID(chat_id), 60, words=30)  # ~4,000 tokens, budget 800
    helper.push(summary_reply(["the seeded questions were about lorem"]))
    model.push(Reply(["fine"]))
    events = await stream_step(client, chat_id, "where were we?")
    names = [n for n, _ in events]
    assert names.index("compaction") < names.index("message_start")
    done = dict(events)["compaction"]
    assert done["reason"] == "rows_left_out" and not done["skipped"]
    context = dict(events)["context"]
    assert context["total_tokens"] <= context["budget"]
    sent = model.requests[-1]["messages"]
    assert any(m["content"].startswith("<conversation-summary>") for m in sent)
    assert sent[-1] == {"role": "user", "content": "where were we?"}
    result = await audit(engine)
    assert result.clean, result.findings()

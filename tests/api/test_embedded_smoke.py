"""Out of the box: the embedded SmolLM2 answers a real step and writes its L1 state; the embedded
embedder embeds."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import numpy as np

from llm.onnx_embedder import OnnxMiniLM
from tests.api.sse_client import history, new_chat, stream_step


async def test_embedded_model_answers_a_streamed_step(jin_factory: Callable[..., str]) -> None:
    base = jin_factory(brain_url=None, helper_url=None, embedded_context_window=2048)
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        status = (await client.get("/v1/status")).json()
        assert status["roles"]["brain"]["embedded"] is True
        assert "SmolLM2" in status["roles"]["brain"]["model"]
        assert status["banner"] and "embedded" in status["banner"]

        chat_id = await new_chat(client, settings={"max_answer_tokens": 24, "temperature": 0})
        events = await stream_step(client, chat_id, "What is the capital of France?")
        assert dict(events)["step_end"]["status"] == "complete", events
        answer = "".join(d["chunk"] for n, d in events if n == "message_chunk")
        assert answer.strip()
        assert (await history(client, chat_id))[-1]["content"] == answer


async def test_embedded_embedder_puts_paraphrases_closer_than_strangers() -> None:
    embedder = OnnxMiniLM()
    vectors = np.array(await embedder.embed([
        "The cat sits on the mat", "A cat is sitting on a rug", "Quarterly tax filing deadline",
    ]))
    assert vectors.shape == (3, embedder.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > 0.6 > vectors[0] @ vectors[2]


async def test_embedded_model_writes_an_l1_state_after_a_turn(
    jin_factory: Callable[..., str]
) -> None:
    base = jin_factory(brain_url=None, helper_url=None, embedded_context_window=2048,
                       runtime_memory=True, l1_wait_s=120, l1_max_tokens=160)
    async with httpx.AsyncClient(base_url=base, timeout=180) as client:
        chat_id = await new_chat(client, settings={"max_answer_tokens": 24, "temperature": 0})
        # (A message it answers without looping: at 135M parameters the helper sometimes
        # repeats its lines up to the token limit, and such an update is rejected.)
        events = await stream_step(client, chat_id, "Hi, I'm Ann. I'm learning to bake bread.")
        assert dict(events)["step_end"]["status"] == "complete", events
        state = (await client.get(f"/v1/chats/{chat_id}/runtime-memory")).json()
        assert state["version"] == 1, state
        assert state["lines"] and all(line["key"] for line in state["lines"])
        update = dict(events)["runtime_memory_update"]
        assert update["memory"] == state["memory"]

"""How many threads the built-in embedder runs on: all the cores this process may use unless
JIN_EMBED_THREADS says otherwise (tests and CI set 1: tests/conftest.py)."""

from __future__ import annotations

import os

import pytest

from api.settings import Settings


def test_unset_the_embedder_uses_every_core_this_process_may_run_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("JIN_EMBED_THREADS", raising=False)
    assert Settings().embedding_threads() == len(os.sched_getaffinity(0))


def test_set_the_embedder_uses_that_many_and_refuses_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JIN_EMBED_THREADS", "3")
    assert Settings().embedding_threads() == 3
    monkeypatch.setenv("JIN_EMBED_THREADS", "0")
    with pytest.raises(ValueError, match="embed_threads"):
        Settings()


def test_the_tests_themselves_embed_on_one_thread() -> None:
    assert Settings().embedding_threads() == 1

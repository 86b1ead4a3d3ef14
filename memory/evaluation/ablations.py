"""Recall layers that `jin bench recall --ablate` can switch off, one at a time.

Each layer is a function from the served RecallConfig to one without that layer; the benchmark
runs each as a row of its own beside the full config. Add a layer here and the CLI knows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from memory.ranking import RecallConfig

Ablation = Callable[[RecallConfig], RecallConfig]

LAYERS: dict[str, Ablation] = {
    # Every item counts as fresh: the decay's floors raised to 1, also around a named moment.
    "recency": lambda c: replace(c, recency_floor=1.0, focus_floor=1.0),
    # A fact and an answer weigh what a user's message weighs.
    "weights": lambda c: replace(c, fact_weight=1.0, assistant_weight=1.0),
    # No two items share more than all their words, so none collapses into another.
    "dedupe": lambda c: replace(c, duplicate_overlap=1.01),
    # One list of the fusion left out: the dense one (keyword only), or the keyword one.
    "fusion-dense": lambda c: replace(c, mode="keyword"),
    "fusion-keyword": lambda c: replace(c, mode="dense"),
    # Only the handling of a moment the question names (memory/time_focus.py) left out.
    "focus": lambda c: replace(c, focus_floor=max(c.recency_floor, c.focus_floor)),
    # Facts are no keys of the messages they were drawn from (memory/recall_store.py).
    "expansion": lambda c: replace(c, fact_expansion=False),
    # Both sides of the conversation weigh alike, whoever the question names (memory/speakers.py).
    "speakers": lambda c: replace(c, speaker_weight=1.0),
    # Both lists search with the question as asked, the names it holds in it (and so no side is
    # told either: memory/speakers.py).
    "names": lambda c: replace(c, name_rows=0),
    # No relevance floor: every item either search returns stays a candidate.
    "floor": lambda c: replace(c, min_similarity=-1.0, min_keyword=0.0),
}


def parse_layers(text: str) -> tuple[str, ...]:
    """A comma list of layer names, in order, each once; ValueError naming the known ones."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in LAYERS]
    if unknown or not names:
        said = ", ".join(unknown) if unknown else "nothing"
        raise ValueError(f"unknown recall layer: {said} (known: {', '.join(LAYERS)})")
    return names

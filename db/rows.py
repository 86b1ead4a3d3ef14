"""Rows into frozen dataclasses, at the speed a window of ~100 rows a step needs."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def built(cls: type[T], **fields: Any) -> T:
    """An instance of a frozen dataclass made without its __init__, which sets each field
    through object.__setattr__: 1.8 us a row against 0.2 us here (a step's window is ~100
    rows, a recall ~120 candidates, a prompt ~80 messages). The caller passes every field (its
    tests check it); the instance stays frozen."""
    instance = _new(cls)
    instance.__dict__.update(fields)
    return instance


_new = object.__new__

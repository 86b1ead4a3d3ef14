"""A synthetic, seeded set of long conversations for `jin bench recall` (format:
memory/evaluation/dataset.py), shaped like real chat histories rather than like a test.

    python -m bench.recall_conversations --out FILE.jsonl [--conversations 8] [--turns 400]
        [--seed 0] [--fact-sources none|turn|session]

Each conversation is two friends chatting over a year: 16-24 sessions days to two months apart,
~400 turns, most of them small talk. Both friends are people; imported into jin, as a two-person
chat history would be, the first is the `user` and the second the `assistant`, turns alternating
within a session. Facts of either friend's life come up in passing, once, in any session; months
later the questions ask for them, naming the friend, in other words than the line that said them
("What animal lives with Anna now?" for "we adopted a ginger kitten from the shelter"). Every
question is asked a few days after the last session, so most evidence is months old. Categories:

- single: one fact, said once (the pet, the allergy, the instrument, ...);
- multi: things of a kind said in different sessions (the trips, the books); all are evidence;
- temporal: an ongoing matter mentioned in different months; the question names the month
  ("What did Anna say in May about her allotment?") and only that month's mention is evidence;
- updated / previous: a fact that changed (a move, a new job); "now" asks for the change, "before"
  for the first value.

The other friend's life has the same kinds of facts, and the small talk brushes against them
(a colleague's puppy, a cousin's move): words alone seldom find the answer. Conversation 3 (of
every 8) is in Russian and conversation 5 in Ukrainian, the rest in English ("lang" on each
question; "age_days" says how old its newest evidence is). The output is a pure function of the
arguments: the same seed gives the same bytes.

With `--fact-sources turn`, each planted line also comes with the fact a memory flush would draw
from it (a "fact" line: "Anna adopted a pet, a ginger kitten", bench/talk.py `noted`), sourced from
that turn: an oracle flush, what a perfect extractor would write, one fact a planted line and
nothing of the small talk. A measurement of fact expansion on this set is therefore an upper bound
of what expansion gives with a real helper model. jin's flush hands the fact store every message
of the compacted span, and the store keeps those that say the fact (memory/facts.py
`drawn_from`); `--fact-sources session` gives each fact its whole session, as the flush hands it
over. (The facts draw nothing from the generator: the turns and questions are those of a set
without them, and the default, `none`, writes no facts: the set the recall tables of
bench/README.md measure.)
"""

from __future__ import annotations

import argparse
import random
import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any

from bench.recall_dataset import write
from bench.talk import Talk
from bench.talk_en import EN
from bench.talk_ru import RU
from bench.talk_uk import UK
from memory.evaluation.baselines import tokens

_FIELD = re.compile(r"\{\w+\}")
LANGS = {"en": EN, "ru": RU, "uk": UK}
TZ_HOURS = {"en": (-5, 0, 1), "ru": (3,), "uk": (2,)}
BASE_DAY = date(2025, 1, 6)
ASIDES = 0.04  # of small-talk lines: enough to mislead a word match now and then, not to bury
KEYED = 0.5  # of questions that share a word with their evidence (see `pair`)
MAX_SPAN_DAYS = 330  # under a year: a month's name never means two months


def language(index: int) -> str:
    return {3: "ru", 5: "uk"}.get(index % 8, "en")


def sentence(text: str) -> str:
    text = " ".join(text.split())
    return text[:1].upper() + text[1:]


def draw(rng: random.Random, fields: dict[str, tuple[str, ...]]) -> dict[str, str]:
    return {name: rng.choice(options) for name, options in sorted(fields.items())}


@dataclass
class Event:
    """A line that carries something a question asks for, and what makes it."""

    key: str
    speaker: int
    text: str
    noted: str  # the fact a flush would write of it


@dataclass
class Plan:
    starts: list[datetime]
    asked_at: datetime
    people: tuple[dict[str, str], dict[str, str]]
    events: list[list[Event]]  # per session
    questions: list[dict[str, Any]] = field(default_factory=list)  # "keys": evidence events


def schedule(rng: random.Random, index: int, turns: int, tz: timezone) -> list[datetime]:
    sessions = max(2, round(turns / rng.uniform(17, 24)))
    # Mostly one to four weeks apart, now and then a month or two.
    gaps = [rng.randint(5, 28) + (rng.randint(20, 45) if rng.random() < 0.15 else 0)
            for _ in range(sessions - 1)]
    scale = min(1.0, MAX_SPAN_DAYS / max(1, sum(gaps)))
    first = BASE_DAY + timedelta(days=2 * index)
    days, day = [0], 0.0
    for gap in gaps:
        day += max(1.0, gap * scale)
        days.append(round(day))
    return [datetime.combine(first + timedelta(days=d), time(), tz)
            + timedelta(hours=rng.randint(8, 21), minutes=rng.randint(0, 59)) for d in days]


def pair(rng: random.Random, said: tuple[str, ...], asked: tuple[str, ...]) -> tuple[str, str]:
    """A line that says a fact and a question that asks for it. Mostly in other words; now and then
    (KEYED) with a word of what was said, as people ask: the kind's last question, with the line
    that shares most words with it."""
    if rng.random() < KEYED:
        words = set(tokens(_FIELD.sub(" ", asked[-1])))
        line = max(said, key=lambda text: len(words & set(tokens(_FIELD.sub(" ", text)))))
        return line, asked[-1]
    return rng.choice(said), rng.choice(asked[:-1] or asked)


def say(text: str, who: dict[str, str], other: dict[str, str], values: dict[str, str]) -> str:
    return sentence(text.format(**who, other=other["name"], **values))


def ask(text: str, who: dict[str, str], **extra: str) -> str:
    return sentence(text.format(**who, **extra))


def plant_facts(rng: random.Random, talk: Talk, plan: Plan) -> None:
    n = len(plan.starts)
    for s, who in enumerate(plan.people):
        other = plan.people[1 - s]
        kinds = sorted(talk.facts)
        for kind in rng.sample(kinds, min(len(kinds), rng.randint(12, 15))):
            fact = talk.facts[kind]
            key = f"{kind}/{s}"
            line, question = pair(rng, fact.said, fact.asked)
            values = draw(rng, fact.fields)
            text = say(line, who, other, values)
            noted = say(talk.noted[kind], who, other, values)
            plan.events[rng.randrange(n)].append(Event(key, s, text, noted))
            plan.questions.append({"keys": [key], "category": "single",
                                   "question": ask(question, who)})


def plant_changes(rng: random.Random, talk: Talk, plan: Plan) -> None:
    n = len(plan.starts)
    for kind in sorted(talk.changes):
        change, s = talk.changes[kind], rng.randrange(2)
        who, other = plan.people[s], plan.people[1 - s]
        values = draw(rng, change.fields)
        first = rng.randrange(max(1, n // 2))
        later = rng.randrange(min(first + 3, n - 1), n)
        old, new = f"{kind}/{s}/old", f"{kind}/{s}/new"
        (said, before), (changed, now) = (pair(rng, change.said, change.asked_before),
                                          pair(rng, change.changed, change.asked_now))
        plan.events[first].append(Event(old, s, say(said, who, other, values),
                                        say(talk.noted[f"{kind}/old"], who, other, values)))
        plan.events[later].append(Event(new, s, say(changed, who, other, values),
                                        say(talk.noted[f"{kind}/new"], who, other, values)))
        plan.questions.append({"keys": [new], "category": "updated",
                               "question": ask(now, who)})
        plan.questions.append({"keys": [old], "category": "previous",
                               "question": ask(before, who)})


def plant_series(rng: random.Random, talk: Talk, plan: Plan) -> None:
    n = len(plan.starts)
    kinds = rng.sample(sorted(talk.series), min(len(talk.series), 2))
    for s, kind in enumerate(kinds):  # one kind a friend, not the same
        series, who, other = talk.series[kind], plan.people[s], plan.people[1 - s]
        keyed, question = pair(rng, series.said, series.asked)
        count = rng.randint(2, 3)
        items = rng.sample(series.fields["item"], count)
        keys = []
        for m, (item, session) in enumerate(zip(items, rng.sample(range(n), count), strict=True)):
            values = draw(rng, series.fields)
            values.update(item=item, item_in=series.fields.get("item_in", series.fields["item"])[
                series.fields["item"].index(item)])
            keys.append(f"{kind}/{s}/{m}")
            line = rng.choice(series.said) if question != series.asked[-1] else keyed
            plan.events[session].append(Event(keys[-1], s, say(line, who, other, values),
                                              say(talk.noted[kind], who, other, values)))
        plan.questions.append({"keys": keys, "category": "multi",
                               "question": ask(question, who)})


def plant_topics(rng: random.Random, talk: Talk, plan: Plan) -> None:
    topics = rng.sample(range(len(talk.topics)), min(len(talk.topics), 4))
    for t, number in enumerate(topics):
        s = t % 2  # two each, never the same matter for both
        topic, who = talk.topics[number], plan.people[s]
        months: dict[int, int] = {}  # month -> the session that mentions the matter then
        for session in rng.sample(range(len(plan.starts)), len(plan.starts)):
            months.setdefault(plan.starts[session].month, session)
        count = min(len(months), len(topic.news), rng.randint(2, 3))
        chosen = rng.sample(sorted(months), count)
        about = topic.about.format(**who)
        for m, (month, news) in enumerate(zip(chosen, rng.sample(topic.news, count),
                                              strict=True)):
            key = f"topic{number}/{s}/{m}"
            noted = say(talk.noted["news"], who, who, {"about": about, "news": sentence(news)})
            plan.events[months[month]].append(Event(key, s, sentence(news), noted))
            if m < 2:  # most matters are asked about for two of their months
                plan.questions.append({"keys": [key], "category": "temporal", "question": ask(
                    rng.choice(talk.asked_when), who, month_in=talk.months_in[month - 1],
                    about=about)})


def small_talk(rng: random.Random, talk: Talk, who: dict[str, str], said: set[str]) -> str:
    """A line of small talk not yet said in this session (after a few tries, any)."""
    for _ in range(6):
        templates = talk.asides if rng.random() < ASIDES else talk.small_talk
        line = sentence(rng.choice(templates).format(**who, **draw(rng, talk.slots)))
        if line not in said:
            break
    said.add(line)
    return line


def chatter(rng: random.Random, talk: Talk, who: dict[str, str], other: dict[str, str],
            j: int, last: bool, said: set[str]) -> str:
    """A line of small talk: what people say between the things worth remembering."""
    if j == 0:
        parts = [rng.choice(talk.greetings).format(other=other["name"])]
        if rng.random() < 0.5:
            parts.append(rng.choice(talk.questions))
        return " ".join(parts)
    if last and rng.random() < 0.7:
        return rng.choice(talk.farewells)
    parts = []
    if j == 1:
        parts.append(rng.choice(talk.greetings).format(other=other["name"]))
    elif rng.random() < 0.5:
        parts.append(rng.choice(talk.reactions))
    parts.append(small_talk(rng, talk, who, said))
    if rng.random() < 0.3:
        parts.append(small_talk(rng, talk, who, said))
    if rng.random() < 0.35:
        parts.append(rng.choice(talk.questions))
    return " ".join(parts)


def with_news(rng: random.Random, talk: Talk, who: dict[str, str], event: Event,
              said: set[str]) -> str:
    # A fact in passing: after a reaction, before other news, as people mention them.
    parts = [rng.choice(talk.reactions)] if rng.random() < 0.3 else []
    parts += [rng.choice(talk.leads), event.text]
    if rng.random() < 0.3:
        parts.append(small_talk(rng, talk, who, said))
    return " ".join(p for p in parts if p)


def lay_out(rng: random.Random, talk: Talk, cid: str, plan: Plan, turns: int) -> tuple[
        list[dict[str, Any]], dict[str, tuple[str, datetime]], list[tuple[Event, str]]]:
    """Turn records, each event's turn (id, created_at), and each event with its turn id."""
    records: list[dict[str, Any]] = []
    placed: dict[str, tuple[str, datetime]] = {}
    said_in: list[tuple[Event, str]] = []
    per_session = turns / len(plan.starts)
    for s, (start, events) in enumerate(zip(plan.starts, plan.events, strict=True)):
        first = rng.randrange(2)  # who opens the session
        length = max(2 * len(events) + 4, round(per_session + rng.uniform(-5, 5)))
        # An event goes to a turn of its speaker, with the next turn for the friend's reply;
        # never the opening pair.
        free = list(range(2, length - 1))
        slots: dict[int, Event] = {}
        for event in events:
            fits = [p for p in free if (p + first) % 2 == event.speaker and p + 1 in free]
            if fits:
                p = rng.choice(fits)
            else:  # a full session: the event takes a pair at its end
                p = length if (length + first) % 2 == event.speaker else length + 1
                length = p + 2
            slots[p] = event
            free = [q for q in free if q not in (p, p + 1)]
        at, said = start, set[str]()
        for j in range(length):
            speaker = (j + first) % 2
            who, other = plan.people[speaker], plan.people[1 - speaker]
            if j in slots:
                content = with_news(rng, talk, who, slots[j], said)
            elif j - 1 in slots:
                content = rng.choice(talk.fact_replies)
            else:
                content = chatter(rng, talk, who, other, j, length - 1 == j, said)
            tid = f"{cid}-s{s:02d}-t{j:02d}"
            records.append({"type": "turn", "conversation_id": cid, "turn_id": tid,
                            "session_id": f"{cid}-s{s:02d}",
                            "role": ("user", "assistant")[speaker], "content": content,
                            "created_at": at.isoformat(timespec="seconds")})
            if j in slots:
                placed[slots[j].key] = (tid, at)
                said_in.append((slots[j], tid))
            at += timedelta(seconds=rng.randint(15, 240))
    return records, placed, said_in


def facts(records: list[dict[str, Any]], said_in: list[tuple[Event, str]],
          sources: str) -> list[dict[str, Any]]:
    """A fact line for each planted line, at its turn's time: sourced from that turn, or from
    every turn of its session (`sources` "session")."""
    turns = {r["turn_id"]: r for r in records}
    by_session: dict[str, list[str]] = {}
    for r in records:
        by_session.setdefault(r["session_id"], []).append(r["turn_id"])
    out = []
    for event, tid in said_in:
        turn = turns[tid]
        named = by_session[turn["session_id"]] if sources == "session" else [tid]
        out.append({"type": "fact", "conversation_id": turn["conversation_id"],
                    "text": event.noted, "sources": named, "created_at": turn["created_at"]})
    return out


def conversation(index: int, turns: int, seed: int, fact_sources: str = "none"
                 ) -> list[dict[str, Any]]:
    # One generator per conversation: adding conversations leaves the earlier ones unchanged.
    rng = random.Random(f"{seed}/{index}")
    lang = language(index)
    talk = LANGS[lang]
    cid = f"talk{index:02d}"
    tz = timezone(timedelta(hours=rng.choice(TZ_HOURS[lang])))
    starts = schedule(rng, index, turns, tz)
    a, b = rng.sample(talk.people, 2)
    asked_at = (starts[-1].replace(hour=0, minute=0) + timedelta(
        days=rng.randint(3, 20), hours=rng.randint(9, 22), minutes=rng.randint(0, 59)))
    plan = Plan(starts, asked_at, (a, b), [[] for _ in starts])
    plant_facts(rng, talk, plan)
    plant_changes(rng, talk, plan)
    plant_series(rng, talk, plan)
    plant_topics(rng, talk, plan)
    for events in plan.events:
        rng.shuffle(events)
    records, placed, said_in = lay_out(rng, talk, cid, plan, turns)
    if fact_sources != "none":
        records += facts(records, said_in, fact_sources)
    for n, q in enumerate(plan.questions):
        evidence = [placed[key] for key in q["keys"]]
        newest = max(at for _, at in evidence)
        records.append({
            "type": "question", "question_id": f"{cid}-q{n:02d}", "conversation_id": cid,
            "question": q["question"], "asked_at": asked_at.isoformat(timespec="seconds"),
            "evidence": [tid for tid, _ in evidence], "category": q["category"], "lang": lang,
            "age_days": (asked_at - newest).days,
        })
    return records


def generate(conversations: int = 8, turns: int = 400, seed: int = 0,
             fact_sources: str = "none") -> list[dict[str, Any]]:
    """Every record of the dataset, conversation by conversation: turns, facts, questions."""
    if conversations < 1 or turns < 100:
        raise ValueError("need at least 1 conversation and 100 turns a conversation")
    return [r for i in range(conversations) for r in conversation(i, turns, seed, fact_sources)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=400, help="about this many a conversation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fact-sources", choices=("none", "turn", "session"), default="none",
                        help="write a fact a planted line, naming as its source its turn or its "
                             "session (default: no facts)")
    args = parser.parse_args(argv)
    try:
        records = generate(args.conversations, args.turns, args.seed, args.fact_sources)
    except ValueError as exc:
        parser.error(str(exc))
    write(args.out, records)
    kinds = [r["type"] for r in records]
    print(f"wrote {kinds.count('turn')} turns, {kinds.count('fact')} facts and "
          f"{kinds.count('question')} questions to {args.out}")


if __name__ == "__main__":
    main()

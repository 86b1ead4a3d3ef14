"""A synthetic, seeded dataset for `jin bench recall` (format: memory/evaluation/dataset.py).

    python -m bench.recall_dataset --out FILE.jsonl [--conversations 20] [--sessions 6]
        [--turns 30] [--seed 0]

Each conversation is one user chatting with an assistant over several sessions, weeks apart.
Facts are planted among filler talk that brushes against them on purpose (office wifi, a
neighbour's dog, flight prices), so that keyword overlap alone does not find the answer.
Question categories:

- single: one planted fact, mostly paraphrased, sometimes sharing the planted keywords;
- updated: a fact changed in a later session; the evidence is the update turn. The question
  carries "superseded": the stale turn a retriever should rank below it;
- previous: the old value of an updated fact; the evidence is the original turn;
- temporal: one topic mentioned twice, weeks apart, with different details; only the time
  phrase of the question ("last week", "back in January") tells which turn is meant.

Every fifth conversation is in Russian and the next in Ukrainian ("lang" on each question).
The output is a pure function of the arguments: the same seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any

from bench.recall_phrases import LANGS, PASSWORD_WORDS, PROJECT_CODES, Phrases

BASE_DAY = date(2026, 1, 5)
TZ_HOURS = {"en": (-5, 0, 1), "ru": (3,), "uk": (2,)}
UPDATABLE = ("sister", "flight", "employer")
SINGLE_ONLY = ("wifi", "pet", "allergy", "codename")


def language(index: int) -> str:
    # By index rather than by draw, so that even a 5-conversation run has both languages.
    return {3: "ru", 4: "uk"}.get(index % 5, "en")


@dataclass
class Plan:
    """One conversation before layout: what each session must contain, what will be asked."""

    starts: list[datetime]
    asked_at: datetime
    events: list[list[tuple[str, str, str]]]  # per session: (key, user text, assistant text)
    questions: list[dict[str, Any]] = field(default_factory=list)  # "key" refers to an event


def schedule(rng: random.Random, index: int, sessions: int, tz: timezone) -> Plan:
    # Sessions spread over 5-9 weeks, so "a few weeks ago" and "last week" never meet.
    span = rng.randint(35, 60)
    days = [round(k * span / (sessions - 1)) for k in range(sessions)]
    first = datetime.combine(BASE_DAY + timedelta(days=2 * index), time(), tz)
    # Sessions start 08:00-19:59 local and last under two hours: one calendar day each.
    starts = [first + timedelta(days=d, hours=rng.randint(8, 19), minutes=rng.randint(0, 59))
              for d in days]
    last_day = starts[-1].replace(hour=0, minute=0)
    asked_at = last_day + timedelta(days=rng.randint(2, 5), hours=rng.randint(9, 21),
                                    minutes=rng.randint(0, 59))
    return Plan(starts=starts, asked_at=asked_at, events=[[] for _ in range(sessions)])


def values(rng: random.Random, p: Phrases, plan: Plan) -> dict[str, str]:
    """The facts of one user, as template fields."""
    (city1, in1), (city2, in2) = rng.sample(p.cities, 2)
    co1, co2 = rng.sample(p.companies, 2)
    animal, animal_n = rng.choice(p.animals)
    flight = plan.starts[-1].date() + timedelta(days=rng.randint(10, 25))
    moved = flight + timedelta(days=rng.randint(3, 12))
    words = rng.sample(PASSWORD_WORDS, 2)
    return {
        "sis": rng.choice(p.sisters), "city1": city1, "in1": in1, "city2": city2, "in2": in2,
        "to": rng.choice(p.destinations), "date1": p.day(flight), "date2": p.day(moved),
        "co1": co1, "co2": co2, "animal": animal, "animal_n": animal_n,
        "name": rng.choice(p.pets), "allergen": rng.choice(p.allergens),
        "code": rng.choice(PROJECT_CODES), "pw": f"{words[0]}-{words[1]}-{rng.randint(10, 99)}",
    }


def plant_facts(rng: random.Random, p: Phrases, plan: Plan) -> None:
    v = values(rng, p, plan)
    sessions = len(plan.events)
    updated = rng.sample(UPDATABLE, rng.randint(1, 2))
    for kind in UPDATABLE + SINGLE_ONLY:
        t = p.facts[kind]
        if kind not in updated:
            plan.events[rng.randrange(sessions)].append(
                (kind, rng.choice(t["plant"]).format(**v), rng.choice(p.fact_replies)))
            # Mostly paraphrase: a question that repeats the planted words is the easy case.
            asks = t["ask"] if rng.random() < 0.65 else t["key"]
            plan.questions.append({"key": kind, "category": "single",
                                   "question": rng.choice(asks).format(**v)})
            continue
        first = rng.randrange(sessions - 1)
        later = rng.randrange(first + 1, sessions)
        new = kind + "/new"
        plan.events[first].append((kind, rng.choice(t["plant"]).format(**v),
                                   rng.choice(p.fact_replies)))
        plan.events[later].append((new, rng.choice(t["update"]).format(**v),
                                   rng.choice(p.fact_replies)))
        plan.questions.append({"key": new, "category": "updated", "superseded": kind,
                               "question": rng.choice(t["ask"] + t["key"]).format(**v)})
        plan.questions.append({"key": kind, "category": "previous",
                               "question": rng.choice(t["before"]).format(**v)})


def recent_phrase(rng: random.Random, p: Phrases, said: date, asked: date) -> str:
    # "This week" and "last week" only where the calendar agrees (ISO weeks, the user's time).
    said_week = said.isocalendar()[:2]
    options = list(p.when_recent)
    if asked.isocalendar()[:2] == said_week:
        options.append(p.when_this_week)
    elif (asked - timedelta(days=7)).isocalendar()[:2] == said_week:
        options.append(p.when_last_week)
    return rng.choice(options)


def old_phrase(rng: random.Random, p: Phrases, said: date, recent: date) -> str:
    options = list(p.when_old)
    if said.month != recent.month:  # a month name is only unambiguous if the mentions differ
        options.append(p.when_month.format(month=p.months_in[said.month - 1]))
    return rng.choice(options)


def plant_topics(rng: random.Random, p: Phrases, plan: Plan) -> None:
    sessions = len(plan.events)
    for n, topic in enumerate(rng.sample(p.topics, rng.randint(1, 2))):
        old_detail, new_detail = rng.sample(topic["details"], 2)
        old_s, new_s = rng.randrange(max(1, (sessions - 1) // 2)), sessions - 1
        keys = (f"topic{n}/old", f"topic{n}/new")
        for key, s, detail in ((keys[0], old_s, old_detail), (keys[1], new_s, new_detail)):
            plan.events[s].append((key, f"{topic['intro']} {detail}", rng.choice(p.topic_replies)))
        said_old, said_new = plan.starts[old_s].date(), plan.starts[new_s].date()
        whens = (old_phrase(rng, p, said_old, said_new),
                 recent_phrase(rng, p, said_new, plan.asked_at.date()))
        for key, when in zip(keys, whens, strict=True):
            text = rng.choice(p.temporal_questions).format(**topic, when=when)
            plan.questions.append({"key": key, "category": "temporal", "question": text})


def choose_questions(rng: random.Random, plan: Plan) -> list[dict[str, Any]]:
    """5-8 questions, at least one of each category the plan offers."""
    pool = plan.questions[:]
    rng.shuffle(pool)
    chosen: list[dict[str, Any]] = []
    for category in ("single", "updated", "temporal", "previous"):
        chosen += [q for q in pool if q["category"] == category][:1]
    rest = [q for q in pool if q not in chosen]
    chosen += rest[: max(0, rng.randint(5, 8) - len(chosen))]
    rng.shuffle(chosen)
    return chosen


def filler(rng: random.Random, p: Phrases, lead: str, deck: list[tuple[str, str]],
           opening: bool) -> tuple[str, str]:
    if not opening and rng.random() < 0.2:
        return rng.choice(p.thanks), rng.choice(p.welcome)
    # Dealt from a shuffled deck so that a session does not repeat itself back to back.
    statement, advice = deck.pop() if deck else rng.choice(p.chatter)
    user = " ".join(filter(None, (lead, statement, rng.choice(p.asks))))
    reply = " ".join(filter(None, (rng.choice(p.acks), advice, rng.choice(p.followups))))
    return user, reply


def with_filler(rng: random.Random, p: Phrases, lead: str, text: str) -> str:
    # A fact in passing, among other news, as people mention them.
    parts = [lead, text]
    if rng.random() < 0.4:
        parts.append(rng.choice(p.chatter)[0])
    return " ".join(filter(None, parts))


def lay_out(rng: random.Random, p: Phrases, cid: str, plan: Plan, turns: int) -> tuple[
        list[dict[str, Any]], dict[str, tuple[str, str]]]:
    """Turn records, and for each planted key its user turn (id, created_at)."""
    records: list[dict[str, Any]] = []
    planted: dict[str, tuple[str, str]] = {}
    for s, (start, events) in enumerate(zip(plan.starts, plan.events, strict=True)):
        pairs = max(len(events) + 1, (turns + rng.randint(-4, 4)) // 2)
        slots = dict(zip(rng.sample(range(pairs), len(events)), events, strict=True))
        at, sid = start, f"{cid}-s{s}"
        deck = rng.sample(p.chatter, len(p.chatter))
        for j in range(pairs):
            lead = rng.choice(p.greetings if j == 0 else p.connectors)
            if j in slots:
                key, user, reply = slots[j]
                user = with_filler(rng, p, lead, user)
            else:
                key, (user, reply) = "", filler(rng, p, lead, deck, opening=j == 0)
            for i, (role, content) in enumerate((("user", user), ("assistant", reply))):
                tid, stamp = f"{sid}-t{2 * j + i:02d}", at.isoformat(timespec="seconds")
                records.append({"type": "turn", "conversation_id": cid, "turn_id": tid,
                                "session_id": sid, "role": role, "content": content,
                                "created_at": stamp})
                if key and role == "user":
                    planted[key] = (tid, stamp)
                at += timedelta(seconds=rng.randint(8, 60) if role == "user" else
                                rng.randint(30, 240))
    return records, planted


def conversation(index: int, sessions: int, turns: int, seed: int) -> list[dict[str, Any]]:
    # One generator per conversation: adding conversations leaves the earlier ones unchanged.
    rng = random.Random(f"{seed}/{index}")
    lang = language(index)
    p = LANGS[lang]
    cid = f"c{index:03d}"
    plan = schedule(rng, index, sessions, timezone(timedelta(hours=rng.choice(TZ_HOURS[lang]))))
    plant_facts(rng, p, plan)
    plant_topics(rng, p, plan)
    records, planted = lay_out(rng, p, cid, plan, turns)
    ids = {r["turn_id"] for r in records}
    for n, q in enumerate(choose_questions(rng, plan)):
        record: dict[str, Any] = {
            "type": "question", "question_id": f"{cid}-q{n}", "conversation_id": cid,
            "question": q["question"], "asked_at": plan.asked_at.isoformat(timespec="seconds"),
            "evidence": [planted[q["key"]][0]], "category": q["category"], "lang": lang,
        }
        if "superseded" in q:
            old, new = planted[q["superseded"]], planted[q["key"]]
            assert datetime.fromisoformat(old[1]) < datetime.fromisoformat(new[1]), q
            record["superseded"] = [old[0]]
        assert set(record["evidence"]) <= ids, record
        records.append(record)
    return records


def generate(conversations: int = 20, sessions: int = 6, turns: int = 30,
             seed: int = 0) -> list[dict[str, Any]]:
    """Every record of the dataset, conversation by conversation, questions after turns."""
    if conversations < 1 or sessions < 2 or turns < 2:
        raise ValueError("need at least 1 conversation, 2 sessions and 2 turns a session")
    return [r for i in range(conversations) for r in conversation(i, sessions, turns, seed)]


def write(path: str | Path, records: list[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--turns", type=int, default=30, help="about this many a session")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        records = generate(args.conversations, args.sessions, args.turns, args.seed)
    except ValueError as exc:
        parser.error(str(exc))
    write(args.out, records)
    questions = sum(r["type"] == "question" for r in records)
    print(f"wrote {len(records) - questions} turns and {questions} questions to {args.out}")


if __name__ == "__main__":
    main()

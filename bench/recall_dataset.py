"""A synthetic, seeded dataset for `jin bench recall`, in the format of bench/recall_metrics.py.

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

# This module runs past the ~400 lines of STYLE.md because the phrase tables at its end (three
# languages, three fifths of the file) are data; the code above them is under 300 lines.

BASE_DAY = date(2026, 1, 5)
TZ_HOURS = {"en": (-5, 0, 1), "ru": (3,), "uk": (2,)}
UPDATABLE = ("sister", "flight", "employer")
SINGLE_ONLY = ("wifi", "pet", "allergy", "codename")


@dataclass(frozen=True)
class Phrases:
    """Everything one language says. Templates take the fields of `values()`."""

    greetings: tuple[str, ...]  # open a session
    connectors: tuple[str, ...]  # open any later message
    asks: tuple[str, ...]
    acks: tuple[str, ...]
    followups: tuple[str, ...]
    thanks: tuple[str, ...]
    welcome: tuple[str, ...]
    chatter: tuple[tuple[str, str], ...]  # (user statement, assistant advice)
    fact_replies: tuple[str, ...]  # never repeat the value: evidence stays the user's turn
    topic_replies: tuple[str, ...]
    facts: dict[str, dict[str, tuple[str, ...]]]  # kind -> plant/update/ask/key/before
    topics: tuple[dict[str, Any], ...]  # intro, who, about, details
    temporal_questions: tuple[str, ...]
    when_recent: tuple[str, ...]
    when_this_week: str
    when_last_week: str
    when_old: tuple[str, ...]
    when_month: str
    months_date: tuple[str, ...]  # "14 March", "14 марта"
    months_in: tuple[str, ...]  # "back in January", "ещё в январе"
    sisters: tuple[str, ...]
    cities: tuple[tuple[str, str], ...]  # (name, "in <name>" as the language says it)
    destinations: tuple[str, ...]  # "to Porto", "в Сочи", "до Варшави"
    companies: tuple[str, ...]
    animals: tuple[tuple[str, str], ...]  # (as object, as subject)
    pets: tuple[str, ...]
    allergens: tuple[str, ...]

    def day(self, d: date) -> str:
        return f"{d.day} {self.months_date[d.month - 1]}"


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


# --- phrase tables -----------------------------------------------------------------------
# Russian and Ukrainian user lines avoid the first-person past tense, which is gendered.

PASSWORD_WORDS = ("blue", "heron", "amber", "fox", "cedar", "otter", "maple", "comet", "lynx",
                  "coral", "finch", "river")
PROJECT_CODES = ("Bluefin", "Kestrel", "Marigold", "Quartz", "Tundra", "Lantern", "Saffron")

EN = Phrases(
    greetings=("Hi!", "Hey!", "Hello again.", "Hi, it's me again."),
    connectors=("", "", "", "", "Okay.", "Right.", "Another thing.", "One more thing."),
    asks=("", "Any tips?", "What would you do?", "Is that normal?", "Thoughts?"),
    acks=("", "I hear you.", "Makes sense.", "Good question.", "Fair enough."),
    followups=("", "", "Want me to sketch a plan?", "Let me know how it goes.",
               "Happy to go into more detail."),
    thanks=("Thanks, that helps.", "Good idea, I'll try that.", "Makes sense, thank you!",
            "Ha, fair point."),
    welcome=("You're welcome!", "Glad it helps.", "Anytime.", "Good luck with it!"),
    chatter=(
        ("I'm trying to cook more at home, but weeknights are chaotic.",
         "Batch-cooking a base like rice or roasted vegetables on Sunday makes weeknights easier."),
        ("The office wifi kept dropping during calls today.",
         "That's frustrating. A cable or a seat closer to the access point often helps."),
        ("I want to read more this year, maybe one book a month.",
         "One a month is realistic. Keeping a book by the bed helps more than people expect."),
        ("My neighbour's dog barks every morning at six.",
         "A friendly word with the neighbour usually goes further than a complaint."),
        ("Flight prices for the summer already look crazy.",
         "Fares often dip midweek; a price alert is worth setting up."),
        ("I've been sleeping badly since the clocks changed.",
         "Waking at the same time every day, weekends too, helps reset the rhythm."),
        ("My sister keeps sending me recipes she never cooks herself.",
         "Ha, maybe cook one of them together on a video call?"),
        ("Work has been a lot this week, the team is short-staffed.",
         "That sounds draining. Is there anything you can push to next week?"),
        ("I started running again, just twice a week for now.",
         "Twice a week is a great start; add distance slowly to avoid injury."),
        ("I need a birthday gift for a friend who has everything.",
         "Experiences work well for people like that: a class, a concert, a nice dinner."),
        ("Our team switched to a new task tracker and nobody likes it.",
         "New tools always feel slower at first; give it a couple of weeks before judging."),
        ("The pollen this spring is making my eyes itch.",
         "An antihistamine in the morning and closed windows in the afternoon can help."),
    ),
    fact_replies=("Got it, I'll keep that in mind.", "Thanks, noted.", "Good to know!",
                  "Okay, noted for later.", "Thanks for telling me, that's useful context."),
    topic_replies=("Thanks for the update. Do you want a reminder for the follow-up?",
                   "Good that you went. Shall I note the next steps?",
                   "Okay. Let me know if you want to plan around it."),
    facts={
        "sister": {
            "plant": ("My sister {sis} lives {in1}.",
                      "{sis}, my sister, has been living {in1} for years now."),
            "update": ("{sis} has moved! She lives {in2} now.",
                       "Update on my sister: she has finally settled {in2}."),
            "ask": ("Which city is {sis} based in?", "Where would I travel to visit my sibling?"),
            "key": ("Where does my sister live?",),
            "before": ("Where did {sis} live before she moved?",
                       "Which city was my sister in before {city2}?"),
        },
        "flight": {
            "plant": ("My flight {to} is on {date1}.", "Booked it: I fly {to} on {date1}."),
            "update": ("The airline moved my flight {to}, it's now on {date2}.",
                       "Change of plans: the trip {to} is now on {date2}."),
            "ask": ("When do I leave {to}?", "What day am I heading {to}?"),
            "key": ("When is my flight {to}?",),
            "before": ("What was the original date of my flight {to}?",
                       "When was the trip {to} planned before it was rescheduled?"),
        },
        "employer": {
            "plant": ("I work at {co1}, mostly on the data side.",
                      "My employer is {co1}, a mid-sized company."),
            "update": ("Big change: I accepted an offer and started at {co2} this week.",
                       "New job! I'm at {co2} now."),
            "ask": ("Which company pays my salary?", "Whose office do I commute to every day?"),
            "key": ("Who is my employer?",),
            "before": ("Where did I work before {co2}?", "What was my previous company?"),
        },
        "wifi": {
            "plant": ("Note to self: the wifi password at the cabin is {pw}.",
                      "Before I forget, the cabin wifi password is {pw}."),
            "ask": ("What's the network key for our weekend place in the woods?",
                    "How do I get my laptop online up at the lodge?"),
            "key": ("What is the wifi password at the cabin?",),
        },
        "pet": {
            "plant": ("We adopted a {animal} last weekend and called it {name}.",
                      "Big news: we got a {animal_n}! The little one is called {name}."),
            "ask": ("What's the name of our new pet?", "What did we call the animal we adopted?"),
            "key": ("What is our {animal_n}'s name?",),
        },
        "allergy": {
            "plant": ("Just so you know, I'm allergic to {allergen}.",
                      "The doctor confirmed it: I have an allergy to {allergen}."),
            "ask": ("What should I avoid because my body reacts badly to it?",
                    "Which substance gives me a bad reaction?"),
            "key": ("What am I allergic to?",),
        },
        "codename": {
            "plant": ("At work our new project got a codename: {code}.",
                      "The project I'm leading is called {code} internally."),
            "ask": ("What's the secret name of the effort I'm leading at work?",
                    "What do we call my current work initiative behind closed doors?"),
            "key": ("What is the codename of my project?",),
        },
    },
    topics=(
        {"intro": "I was at the dentist today.", "who": "the dentist", "about": "the dentist",
         "details": ("They said I need a crown on a back tooth.",
                     "They said my gums look much healthier.",
                     "They said a wisdom tooth has to come out.",
                     "They told me to switch to a softer toothbrush.")},
        {"intro": "Picked the car up from the garage today.", "who": "the mechanic",
         "about": "the car",
         "details": ("The mechanic said the brake pads are almost worn through.",
                     "They found a small leak in the radiator.",
                     "The timing belt needs replacing soon.",
                     "Nothing serious, just a loose heat shield.")},
        {"intro": "Had my physio session this morning.", "who": "the physio", "about": "physio",
         "details": ("They want me to do knee exercises every day.",
                     "My shoulder is healing faster than expected.",
                     "I have to stop running for two weeks.",
                     "They suggested a standing desk for my back.")},
    ),
    temporal_questions=("What did {who} tell me {when}?", "What did I say about {about} {when}?"),
    when_recent=("a few days ago", "the other day"),
    when_this_week="earlier this week",
    when_last_week="last week",
    when_old=("a few weeks ago", "the first time I brought it up"),
    when_month="back in {month}",
    months_date=("January", "February", "March", "April", "May", "June", "July", "August",
                 "September", "October", "November", "December"),
    months_in=("January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December"),
    sisters=("Olena", "Maya", "Clara", "Ines", "Hannah", "Priya"),
    cities=(("Lviv", "in Lviv"), ("Kyiv", "in Kyiv"), ("Leeds", "in Leeds"), ("Lyon", "in Lyon"),
            ("Denver", "in Denver"), ("Toronto", "in Toronto")),
    destinations=("to Porto", "to Oslo", "to Athens", "to Lisbon", "to Dublin"),
    companies=("Northwind Logistics", "Brightline Health", "Copperleaf Games", "Halden Robotics",
               "Mistral Foods"),
    animals=(("puppy", "puppy"), ("kitten", "kitten")),
    pets=("Biscuit", "Pixel", "Mango", "Juniper", "Pepper"),
    allergens=("penicillin", "peanuts", "shellfish", "latex", "sesame"),
)

RU = Phrases(
    greetings=("Привет!", "Здравствуй!", "Снова привет.", "Привет, это снова я."),
    connectors=("", "", "", "", "Ладно.", "Так.", "И ещё.", "Ещё одно."),
    asks=("", "Что посоветуешь?", "Как думаешь, это нормально?", "Есть идеи?"),
    acks=("", "Понимаю.", "Хороший вопрос.", "Бывает."),
    followups=("", "", "Хотите, составлю план?", "Расскажите потом, как получится.",
               "Если нужно, могу подробнее."),
    thanks=("Спасибо, это помогает.", "Хорошая идея, попробую.", "Понятно, спасибо!"),
    welcome=("Всегда пожалуйста.", "Обращайтесь!", "Удачи!"),
    chatter=(
        ("Хочу чаще готовить дома, но по будням совсем нет времени.",
         "Попробуйте в воскресенье готовить основу на несколько дней: рис, запечённые овощи."),
        ("В офисе весь день отваливался вайфай прямо во время созвонов.",
         "Неприятно. Часто помогает кабель или место поближе к роутеру."),
        ("Хочу в этом году больше читать, хотя бы книгу в месяц.",
         "Книга в месяц — реальная цель. Держите книгу у кровати, это правда работает."),
        ("Соседская собака лает каждое утро в шесть.",
         "Спокойный разговор с соседями обычно помогает больше, чем жалоба."),
        ("Цены на летние перелёты уже какие-то безумные.",
         "Обычно билеты дешевле в середине недели; стоит включить уведомления о ценах."),
        ("После перевода часов совсем плохо сплю.",
         "Помогает вставать в одно и то же время каждый день, даже в выходные."),
        ("Сестра постоянно присылает рецепты, которые сама никогда не готовит.",
         "Ха, может, приготовить что-нибудь вместе по видеосвязи?"),
        ("На работе завал, в команде не хватает людей.",
         "Звучит выматывающе. Можно что-то перенести на следующую неделю?"),
        ("Снова начинаю бегать, пока два раза в неделю.",
         "Отличное начало; увеличивайте дистанцию постепенно, чтобы не травмироваться."),
        ("Нужна идея подарка для друга, у которого всё есть.",
         "Таким людям хорошо дарить впечатления: мастер-класс, концерт, ужин."),
        ("Команда перешла на новый таск-трекер, и он никому не нравится.",
         "Новые инструменты поначалу всегда кажутся медленнее; дайте ему пару недель."),
        ("Этой весной от пыльцы чешутся глаза.",
         "Антигистаминное утром и закрытые окна днём обычно помогают."),
    ),
    fact_replies=("Понятно, запомню.", "Спасибо, принято.", "Хорошо, учту.",
                  "Ясно, буду иметь в виду."),
    topic_replies=("Спасибо, что рассказали. Напомнить про следующий визит?",
                   "Хорошо, что всё выяснилось. Записать дальнейшие шаги?",
                   "Понятно. Если нужно что-то спланировать, скажите."),
    facts={
        "sister": {
            "plant": ("Моя сестра {sis} живёт {in1}.",
                      "{sis}, моя сестра, уже много лет живёт {in1}."),
            "update": ("{sis} переехала! Теперь она живёт {in2}.",
                       "Новости про сестру: она наконец обустроилась {in2}."),
            "ask": ("В каком городе сейчас {sis}?", "Куда мне ехать в гости к сестре?"),
            "key": ("Где живёт моя сестра?",),
            "before": ("Где {sis} жила до переезда?",
                       "В каком городе жила сестра, пока не оказалась {in2}?"),
        },
        "flight": {
            "plant": ("Мой рейс {to} — {date1}.", "Билеты куплены: лечу {to} {date1}."),
            "update": ("Авиакомпания перенесла мой рейс {to}, теперь он {date2}.",
                       "Планы поменялись: поездка {to} теперь {date2}."),
            "ask": ("Когда я улетаю {to}?", "Какого числа у меня поездка {to}?"),
            "key": ("Когда мой рейс {to}?",),
            "before": ("На какое число изначально был рейс {to}?",
                       "Какая дата была у рейса {to} до переноса?"),
        },
        "employer": {
            "plant": ("Я работаю в компании {co1}, в основном с данными.",
                      "Мой работодатель — {co1}, компания среднего размера."),
            "update": ("Большие перемены: с этой недели я в компании {co2}.",
                       "Новая работа! Теперь я в компании {co2}."),
            "ask": ("Какая компания платит мне зарплату?", "В чей офис я езжу каждый день?"),
            "key": ("Кто мой работодатель?",),
            "before": ("Где была моя работа до компании {co2}?",
                       "Какое у меня было прошлое место работы?"),
        },
        "wifi": {
            "plant": ("Чтобы не забыть: пароль от вайфая на даче — {pw}.",
                      "Запиши: на даче пароль от Wi-Fi {pw}."),
            "ask": ("Какой ключ сети у нас за городом?",
                    "Как подключить ноутбук к интернету, когда мы за городом?"),
            "key": ("Какой пароль от вайфая на даче?",),
        },
        "pet": {
            "plant": ("На выходных мы взяли {animal}, его зовут {name}.",
                      "Новость: у нас теперь {animal_n} по имени {name}!"),
            "ask": ("Как зовут нашего нового питомца?",
                    "Какое имя мы дали животному, которое взяли?"),
            "key": ("Как зовут нашего {animal}?",),
        },
        "allergy": {
            "plant": ("На всякий случай: у меня аллергия на {allergen}.",
                      "Врач подтвердил: у меня аллергия на {allergen}."),
            "ask": ("Чего мне нужно избегать, потому что организм плохо реагирует?",
                    "На что у меня бывает плохая реакция?"),
            "key": ("На что у меня аллергия?",),
        },
        "codename": {
            "plant": ("На работе у нашего нового проекта появилось кодовое имя: {code}.",
                      "Проект, которым я руковожу, внутри называется {code}."),
            "ask": ("Как внутри компании называют то, чем я сейчас занимаюсь на работе?",
                    "Какое секретное название у моей рабочей инициативы?"),
            "key": ("Какое кодовое название у моего проекта?",),
        },
    },
    topics=(
        {"intro": "Сегодня был приём у стоматолога.", "who": "стоматолог",
         "about": "со стоматологом",
         "details": ("Сказали, что нужна коронка на дальний зуб.",
                     "Сказали, что дёсны стали заметно здоровее.",
                     "Сказали, что зуб мудрости придётся удалить.",
                     "Посоветовали перейти на мягкую щётку.")},
        {"intro": "Сегодня забрали машину из сервиса.", "who": "механик", "about": "с машиной",
         "details": ("Механик сказал, что тормозные колодки почти стёрлись.",
                     "Нашли небольшую течь в радиаторе.", "Скоро нужно менять ремень ГРМ.",
                     "Ничего серьёзного, просто болтался теплозащитный экран.")},
        {"intro": "Утром было занятие с физиотерапевтом.", "who": "физиотерапевт",
         "about": "с физиотерапевтом",
         "details": ("Велели каждый день делать упражнения для колена.",
                     "Плечо заживает быстрее, чем ожидалось.", "Сказали две недели не бегать.",
                     "Посоветовали стоячий стол для спины.")},
    ),
    temporal_questions=("Что мне сказал {who} {when}?", "Что там было {about} {when}?"),
    when_recent=("несколько дней назад", "на днях"),
    when_this_week="на этой неделе",
    when_last_week="на прошлой неделе",
    when_old=("несколько недель назад", "в самый первый раз"),
    when_month="ещё в {month}",
    months_date=("января", "февраля", "марта", "апреля", "мая", "июня", "июля", "августа",
                 "сентября", "октября", "ноября", "декабря"),
    months_in=("январе", "феврале", "марте", "апреле", "мае", "июне", "июле", "августе",
               "сентябре", "октябре", "ноябре", "декабре"),
    sisters=("Оля", "Маша", "Катя", "Лена", "Наташа"),
    cities=(("Казань", "в Казани"), ("Тверь", "в Твери"), ("Самара", "в Самаре"),
            ("Пермь", "в Перми"), ("Новосибирск", "в Новосибирске"),
            ("Екатеринбург", "в Екатеринбурге")),
    destinations=("в Сочи", "в Стамбул", "в Ереван", "в Тбилиси", "в Калининград"),
    companies=("«Альтаир»", "«Вектор-Софт»", "«Полярис»", "«Гелиос»", "«Тайга Лаб»"),
    animals=(("щенка", "щенок"), ("котёнка", "котёнок")),
    pets=("Бублик", "Пиксель", "Манго", "Кнопка", "Перчик"),
    allergens=("пенициллин", "арахис", "морепродукты", "латекс", "кунжут"),
)

UK = Phrases(
    greetings=("Привіт!", "Вітаю!", "Знову привіт.", "Привіт, це знову я."),
    connectors=("", "", "", "", "Гаразд.", "Так.", "І ще.", "Ще одне."),
    asks=("", "Що порадиш?", "Як думаєш, це нормально?", "Є ідеї?"),
    acks=("", "Розумію.", "Гарне питання.", "Буває."),
    followups=("", "", "Хочете, складу план?", "Розкажіть потім, як вийде.",
               "Якщо треба, можу детальніше."),
    thanks=("Дякую, це допомагає.", "Гарна ідея, спробую.", "Зрозуміло, дякую!"),
    welcome=("Завжди будь ласка.", "Звертайтеся!", "Успіхів!"),
    chatter=(
        ("Хочу частіше готувати вдома, але в будні зовсім немає часу.",
         "Спробуйте в неділю готувати основу на кілька днів: рис, запечені овочі."),
        ("В офісі весь день відвалювався вайфай просто під час дзвінків.",
         "Прикро. Часто допомагає кабель або місце ближче до роутера."),
        ("Хочу цього року більше читати, хоча б книжку на місяць.",
         "Книжка на місяць — реальна мета. Тримайте книжку біля ліжка, це справді працює."),
        ("Сусідський пес гавкає щоранку о шостій.",
         "Спокійна розмова з сусідами зазвичай допомагає більше, ніж скарга."),
        ("Ціни на літні перельоти вже якісь шалені.",
         "Зазвичай квитки дешевші посеред тижня; варто ввімкнути сповіщення про ціни."),
        ("Після переведення годинника зовсім погано сплю.",
         "Допомагає прокидатися в один і той самий час щодня, навіть у вихідні."),
        ("Сестра постійно надсилає рецепти, які сама ніколи не готує.",
         "Ха, може, приготувати щось разом по відеозв'язку?"),
        ("На роботі завал, у команді бракує людей.",
         "Звучить виснажливо. Можна щось перенести на наступний тиждень?"),
        ("Знову починаю бігати, поки що двічі на тиждень.",
         "Чудовий початок; збільшуйте дистанцію поступово, щоб не травмуватися."),
        ("Потрібна ідея подарунка для друга, який має все.",
         "Таким людям добре дарувати враження: майстер-клас, концерт, вечерю."),
        ("Команда перейшла на новий таск-трекер, і він нікому не подобається.",
         "Нові інструменти спочатку завжди здаються повільнішими; дайте йому кілька тижнів."),
        ("Цієї весни від пилку сверблять очі.",
         "Антигістамінне зранку й зачинені вікна вдень зазвичай допомагають."),
    ),
    fact_replies=("Зрозуміло, запам'ятаю.", "Дякую, прийнято.", "Добре, врахую.",
                  "Ясно, матиму на увазі."),
    topic_replies=("Дякую, що розповіли. Нагадати про наступний візит?",
                   "Добре, що все з'ясувалося. Записати подальші кроки?",
                   "Зрозуміло. Якщо треба щось спланувати, скажіть."),
    facts={
        "sister": {
            "plant": ("Моя сестра {sis} живе {in1}.",
                      "{sis}, моя сестра, вже багато років живе {in1}."),
            "update": ("{sis} переїхала! Тепер вона живе {in2}.",
                       "Новини про сестру: вона нарешті облаштувалася {in2}."),
            "ask": ("У якому місті зараз {sis}?", "Куди мені їхати в гості до сестри?"),
            "key": ("Де живе моя сестра?",),
            "before": ("Де {sis} жила до переїзду?",
                       "У якому місті жила сестра, поки не опинилася {in2}?"),
        },
        "flight": {
            "plant": ("Мій рейс {to} — {date1}.", "Квитки куплено: лечу {to} {date1}."),
            "update": ("Авіакомпанія перенесла мій рейс {to}, тепер він {date2}.",
                       "Плани змінилися: поїздка {to} тепер {date2}."),
            "ask": ("Коли я вилітаю {to}?", "Якого числа в мене поїздка {to}?"),
            "key": ("Коли мій рейс {to}?",),
            "before": ("На яке число спочатку був рейс {to}?",
                       "Яка дата була в рейсу {to} до перенесення?"),
        },
        "employer": {
            "plant": ("Я працюю в компанії {co1}, переважно з даними.",
                      "Мій роботодавець — {co1}, компанія середнього розміру."),
            "update": ("Великі зміни: з цього тижня я в компанії {co2}.",
                       "Нова робота! Тепер я в компанії {co2}."),
            "ask": ("Яка компанія платить мені зарплату?", "До чийого офісу я їжджу щодня?"),
            "key": ("Хто мій роботодавець?",),
            "before": ("Де була моя робота до компанії {co2}?",
                       "Яке в мене було попереднє місце роботи?"),
        },
        "wifi": {
            "plant": ("Щоб не забути: пароль від вайфаю на дачі — {pw}.",
                      "Запиши: на дачі пароль від Wi-Fi {pw}."),
            "ask": ("Який ключ мережі в нас за містом?",
                    "Як під'єднати ноутбук до інтернету, коли ми за містом?"),
            "key": ("Який пароль від вайфаю на дачі?",),
        },
        "pet": {
            "plant": ("На вихідних ми взяли {animal}, його звати {name}.",
                      "Новина: у нас тепер {animal_n} на ім'я {name}!"),
            "ask": ("Як звати нашого нового улюбленця?", "Яке ім'я ми дали тваринці, яку взяли?"),
            "key": ("Як звати наше {animal_n}?",),
        },
        "allergy": {
            "plant": ("Про всяк випадок: у мене алергія на {allergen}.",
                      "Лікар підтвердив: у мене алергія на {allergen}."),
            "ask": ("Чого мені треба уникати, бо організм погано реагує?",
                    "На що в мене буває погана реакція?"),
            "key": ("На що в мене алергія?",),
        },
        "codename": {
            "plant": ("На роботі наш новий проєкт отримав кодове ім'я: {code}.",
                      "Проєкт, яким я керую, всередині називається {code}."),
            "ask": ("Як усередині компанії називають те, чим я зараз займаюся на роботі?",
                    "Яка секретна назва в моєї робочої ініціативи?"),
            "key": ("Яка кодова назва мого проєкту?",),
        },
    },
    topics=(
        {"intro": "Сьогодні був прийом у стоматолога.", "who": "стоматолог",
         "about": "зі стоматологом",
         "details": ("Сказали, що потрібна коронка на дальній зуб.",
                     "Сказали, що ясна стали помітно здоровішими.",
                     "Сказали, що зуб мудрості доведеться видалити.",
                     "Порадили перейти на м'яку щітку.")},
        {"intro": "Сьогодні забрали машину із сервісу.", "who": "механік", "about": "з машиною",
         "details": ("Механік сказав, що гальмівні колодки майже стерлися.",
                     "Знайшли невеликий витік у радіаторі.", "Скоро треба міняти ремінь ГРМ.",
                     "Нічого серйозного, просто бовтався теплозахисний екран.")},
        {"intro": "Зранку було заняття з фізіотерапевтом.", "who": "фізіотерапевт",
         "about": "з фізіотерапевтом",
         "details": ("Сказали щодня робити вправи для коліна.",
                     "Плече загоюється швидше, ніж очікували.", "Сказали два тижні не бігати.",
                     "Порадили стоячий стіл для спини.")},
    ),
    temporal_questions=("Що мені сказав {who} {when}?", "Що там було {about} {when}?"),
    when_recent=("кілька днів тому", "днями"),
    when_this_week="цього тижня",
    when_last_week="минулого тижня",
    when_old=("кілька тижнів тому", "найпершого разу"),
    when_month="ще в {month}",
    months_date=("січня", "лютого", "березня", "квітня", "травня", "червня", "липня", "серпня",
                 "вересня", "жовтня", "листопада", "грудня"),
    months_in=("січні", "лютому", "березні", "квітні", "травні", "червні", "липні", "серпні",
               "вересні", "жовтні", "листопаді", "грудні"),
    sisters=("Оксана", "Марічка", "Ірина", "Олена", "Соломія"),
    cities=(("Львів", "у Львові"), ("Київ", "у Києві"), ("Одеса", "в Одесі"),
            ("Харків", "у Харкові"), ("Дніпро", "у Дніпрі"), ("Вінниця", "у Вінниці")),
    destinations=("до Варшави", "до Праги", "до Відня", "до Лісабона", "до Риму"),
    companies=("«Смарагд»", "«Карпати Дата»", "«Ліра»", "«Оріон»", "«Вежа Софт»"),
    animals=(("цуценя", "цуценя"), ("кошеня", "кошеня")),
    pets=("Бублик", "Піксель", "Манго", "Ґудзик", "Перчик"),
    allergens=("пеніцилін", "арахіс", "морепродукти", "латекс", "кунжут"),
)

LANGS = {"en": EN, "ru": RU, "uk": UK}


if __name__ == "__main__":
    main()

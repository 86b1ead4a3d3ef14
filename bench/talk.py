"""What the two friends of bench/recall_conversations.py say: the shape of a language's lines.
The lines themselves are data in bench/talk_en.py, talk_ru.py and talk_uk.py.

Templates take `{fields}`: the speaker's (`name`, `gen` as "of <name>" needs it, `pos` for
his/her, `other` for the friend's name), the month (`month_in`), and a fact's own fields, each
drawn from its tuple. A question never takes a fact's fields: it asks for the value, in other
words than the line that said it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fact:
    """Something a speaker says once about their life, and the ways a question asks for it."""

    said: tuple[str, ...]
    asked: tuple[str, ...]
    fields: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """A fact that changes later: the first value, the new one, and a question for each."""

    said: tuple[str, ...]
    changed: tuple[str, ...]
    asked_now: tuple[str, ...]
    asked_before: tuple[str, ...]
    fields: dict[str, tuple[str, ...]]  # `{x1}` for the first value and `{x2}` for the new


@dataclass(frozen=True)
class Series:
    """Several things of a kind (trips, books), each said in a session of its own; one question
    asks for all of them."""

    said: tuple[str, ...]
    asked: tuple[str, ...]
    fields: dict[str, tuple[str, ...]]  # `item` is drawn without repeats


@dataclass(frozen=True)
class Topic:
    """An ongoing matter of one speaker, mentioned months apart with different news; a question
    names the month (`{month_in}`) and the matter (`about`, which may take `{pos}`)."""

    about: str
    news: tuple[str, ...]  # each a different mention, said in a different month


@dataclass(frozen=True)
class Talk:
    """Everything one language says."""

    people: tuple[dict[str, str], ...]  # name, gen, pos
    months_in: tuple[str, ...]  # "in January", "в январе", "у січні"
    greetings: tuple[str, ...]
    farewells: tuple[str, ...]
    reactions: tuple[str, ...]
    questions: tuple[str, ...]  # asked back in small talk
    small_talk: tuple[str, ...]  # templates over `slots`
    # Small talk that brushes against the facts (a colleague's puppy), now and then.
    asides: tuple[str, ...]
    slots: dict[str, tuple[str, ...]]
    leads: tuple[str, ...]  # before a fact: "By the way,"
    fact_replies: tuple[str, ...]  # never repeat the value: the evidence is the line that said it
    facts: dict[str, Fact]
    changes: dict[str, Change]
    series: dict[str, Series]
    topics: tuple[Topic, ...]
    asked_when: tuple[str, ...]  # temporal questions: {name}, {gen}, {month_in}, {about}
    # What a memory flush would write of each planted line: a short third-person sentence, by
    # kind (a change's "kind/old" and "kind/new"; "news" for a topic's, over {about} and
    # {news}), taking the speaker's fields and the fact's values.
    noted: dict[str, str] = field(default_factory=dict)

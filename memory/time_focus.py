"""The moment a question asks about, when it names one: "in May", "last week", "two months ago",
"when did I first ...". Pure.

Recall's recency favours what is recent; a question about a past moment wants what was said
then. So when a question names a moment, recency is measured from that moment instead of from
now (memory/recall_store.py), and a question about the first time turns recency off, since the
oldest mention is the one it asks for. English, Russian and Ukrainian.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from memory.ranking import RecallConfig


@dataclass(frozen=True)
class TimeFocus:
    """Where a question points in time: a moment and how wide it is, or the earliest mention."""

    at: datetime | None  # the middle of the moment asked about
    span_days: float = 0.0  # inside ±span of `at`, everything counts as fresh
    earliest: bool = False  # "the first time": no recency at all


_EN_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
              "september", "october", "november", "december")
# "in May" but not "may I": "may" needs a preposition before it; the other names do not.
_MONTH = re.compile(r"\b(?:(?P<en>january|february|march|april|june|july|august|september|"
                    r"october|november|december)|(?:in|during|since|of|early|late|mid)\s+"
                    r"(?P<may>may))\b(?:\s+(?P<year>(?:19|20)\d\d))?", re.IGNORECASE)
# Russian and Ukrainian month names in their case forms (not "трава", "майбутнє").
_RU_UK_MONTHS = [
    r"январ[ьяе]|січ(?:ень|ня|ні)", r"феврал[ьяе]|лют(?:ий|ого|ому|ім)",
    r"март[ае]?|берез(?:ень|ня|ні)", r"апрел[ьяе]|квіт(?:ень|ня|ні)",
    r"ма[йяе]|трав(?:ень|ня|ні)", r"июн[ьяе]|черв(?:ень|ня|ні)", r"июл[ьяе]|лип(?:ень|ня|ні)",
    r"август[ае]?|серп(?:ень|ня|ні)", r"сентябр[ьяе]|вер(?:есень|есня|есні)",
    r"октябр[ьяе]|жовт(?:ень|ня|ні)", r"ноябр[ьяе]|листопад[аі]?", r"декабр[ьяе]|груд(?:ень|ня|ні)",
]
_MONTH_CYR = [re.compile(rf"(?<![а-яіїєґ])(?:{forms})(?![а-яіїєґ])", re.IGNORECASE)
              for forms in _RU_UK_MONTHS]
_YEAR = re.compile(r"\b(?:in|during|back in|в|у)\s+((?:19|20)\d\d)\b", re.IGNORECASE)

_UNITS = {"day": 1, "week": 7, "month": 30.4, "year": 365.25}
_UNIT_WORDS = [
    ("day", r"days?|дн(?:я|ей|і|ів)|день|доби"),
    ("week", r"weeks?|недел[юиь]|тиж(?:день|ні|нів)"),
    ("month", r"months?|месяц(?:а|ев)?|місяц(?:і|ів|ь)"),
    ("year", r"years?|год(?:а)?|лет|рок(?:и|ів)?|рік"),
]
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "a couple of": 2, "a few": 3, "several": 3,
    "один": 1, "одну": 1, "два": 2, "две": 2, "три": 3, "четыре": 4, "пять": 5,
    "несколько": 3, "одна": 1, "дві": 2, "чотири": 4, "п'ять": 5, "кілька": 3,
}
_NUMBER = r"(?P<n>\d+|" + "|".join(sorted(map(re.escape, _NUMBER_WORDS), key=len,
                                           reverse=True)) + r")"
_AGO = [re.compile(rf"\b{_NUMBER}\s+(?P<unit>{words})\s+(?:ago|назад|тому)\b", re.IGNORECASE)
        for _, words in _UNIT_WORDS]
_AGO_UNITS = [unit for unit, _ in _UNIT_WORDS]
# "last week", "на прошлой неделе", "минулого тижня", "yesterday" ...
_LAST = [
    (re.compile(r"\byesterday\b|вчера|вчора", re.IGNORECASE), 1, 1),
    (re.compile(r"\blast week\b|прошл\w+ недел|минул\w+ тиж", re.IGNORECASE), 7, 3.5),
    (re.compile(r"\blast month\b|прошл\w+ месяц|минул\w+ місяц", re.IGNORECASE), 30.4, 15),
    (re.compile(r"\blast year\b|прошл\w+ год|минул\w+ рок", re.IGNORECASE), 365.25, 182),
]
_FIRST = re.compile(r"\b(?:first|earliest)\b|впервые|в первый раз|вперше|уперше|"
                    r"перший раз|першого разу", re.IGNORECASE)

# A word each family of patterns above needs in any question it matches (as `casefold` writes
# it). Most questions name no moment: one look for these words each spares the patterns, ~1 ms
# a question on the development machine (Python's case-blind search of these alternations is
# slow), which a step spent on its own time.
_FIRST_CUES = ("first", "earliest", "впервые", "в первый раз", "вперше", "уперше", "перший раз",
               "першого разу")
_LAST_CUES = ("yesterday", "вчера", "вчора", "last", "прошл", "минул")
_AGO_CUES = ("ago", "назад", "тому")
_MONTH_CYR_CUES = ("январ", "січ", "феврал", "лют", "март", "берез", "апрел", "квіт", "ма",
                   "трав", "июн", "черв", "июл", "лип", "август", "серп", "сентябр", "вер",
                   "октябр", "жовт", "ноябр", "листопад", "декабр", "груд")


def _says(folded: str, cues: tuple[str, ...]) -> bool:
    return any(cue in folded for cue in cues)


def time_focus(question: str, now: datetime) -> TimeFocus | None:
    """The moment `question` (asked at `now`) is about, or None when it names none."""
    folded = question.casefold()
    if _says(folded, _FIRST_CUES) and _FIRST.search(question):
        return TimeFocus(None, earliest=True)
    for pattern, back_days, span in _LAST if _says(folded, _LAST_CUES) else ():
        if pattern.search(question):
            return TimeFocus(now - timedelta(days=back_days), span)
    agos = zip(_AGO, _AGO_UNITS, strict=True) if _says(folded, _AGO_CUES) else iter(())
    for pattern, unit in agos:
        if match := pattern.search(question):
            n = match.group("n").lower()
            count = int(n) if n.isdigit() else _NUMBER_WORDS.get(n, 1)
            days = count * _UNITS[unit]
            return TimeFocus(now - timedelta(days=days), max(_UNITS[unit] / 2, days * 0.15))
    if month := _month(question, folded):
        number, year = month
        return _month_focus(number, year, now)
    if any(century in folded for century in ("19", "20")) and (
            year_match := _YEAR.search(question)):
        middle = datetime(int(year_match.group(1)), 7, 2, tzinfo=UTC)
        return TimeFocus(middle, 183)
    return None


def _month(question: str, folded: str) -> tuple[int, int | None] | None:
    if _says(folded, _EN_MONTHS) and (match := _MONTH.search(question)):
        name = (match.group("en") or match.group("may")).lower()
        year = int(match.group("year")) if match.group("year") else None
        return _EN_MONTHS.index(name) + 1, year
    for number, pattern in enumerate(_MONTH_CYR if _says(folded, _MONTH_CYR_CUES) else (), 1):
        if pattern.search(question):
            return number, None
    return None


def _month_focus(month: int, year: int | None, now: datetime) -> TimeFocus:
    """The middle of the month named: of the year given, or its latest occurrence up to now."""
    if year is None:
        year = now.year if month <= now.month else now.year - 1
    middle = datetime(year, month, 15, 12, tzinfo=now.tzinfo or UTC)
    return TimeFocus(middle, 16)


def focused(question: str, now: datetime, cfg: RecallConfig) -> tuple[datetime, RecallConfig]:
    """Where recency is measured from, and how: from the moment the question names, if it names
    one (`time_focus`); with no recency for a question about the first time."""
    focus = time_focus(question, now)
    if focus is None:
        return now, cfg
    if focus.earliest or focus.at is None:
        return now, replace(cfg, recency_floor=1.0)
    return focus.at, replace(cfg, freshness_days=max(cfg.freshness_days, focus.span_days),
                             recency_floor=min(cfg.recency_floor, cfg.focus_floor))

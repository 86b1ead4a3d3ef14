"""The salience filter: turns that are only greetings, thanks or filler never reach extraction.

A turn is filler when its words are covered, end to end, by phrases of the lists below (English,
Russian, Ukrainian), with nothing else but punctuation and emoji. Whole phrases, not a bag of
words: "let me know if you need anything else" is filler, "I need you to know my dog is ill"
is not, though most of its words are in that phrase. Any digit makes a turn content ("ok, at
7"). Bare yes and no are content: they answer something.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.events.types import Turn

_PHRASES = """
hi|hello|hey|hey there|hi there|hello there|yo|sup|what's up|good morning|good afternoon
good evening|good night|morning|bye|goodbye|bye bye|see you|see you later|see ya
talk to you later|later
thanks|thank you|thank you so much|thanks so much|thanks a lot|many thanks|thx|ty|cheers
ok|okay|k|kk|cool|nice|great|awesome|perfect|sounds good|got it|i see|sure|alright|all right
lol|lmao|wow|oh|ah|hmm|hm|uh|um|you're welcome|you are welcome|no problem|np|no worries
glad to help|happy to help|glad i could help|my pleasure|anytime|have a nice day
have a good day|have a great day|how are you|how are you doing|i'm fine|i am fine|fine|good
fine thanks|let me know if you need anything else|let me know if you have any other questions
is there anything else i can help with|is there anything else i can help you with
how can i help|how can i help you|how can i help you today|what can i do for you|again
привет|приветик|здравствуй|здравствуйте|добрый день|доброе утро|добрый вечер|доброй ночи
спокойной ночи|пока|до свидания|до встречи|до завтра|спасибо|спасибо большое|большое спасибо
благодарю|ок|окей|хорошо|ладно|понятно|ясно|круто|отлично|супер|класс|ага|угу|хм|ммм|ого
лол|пожалуйста|не за что|рад помочь|рада помочь|всего доброго|всего хорошего|как дела
как ты|нормально|чем могу помочь|обращайтесь|ещё раз|еще раз
привіт|вітаю|добрий день|доброго ранку|добрий ранок|добрий вечір|доброї ночі|на добраніч
бувай|бувайте|до побачення|до зустрічі|до завтра|дякую|дуже дякую|щиро дякую|красно дякую
ок|окей|добре|гаразд|зрозуміло|ясно|круто|чудово|супер|клас|ага|угу|хм|будь ласка
нема за що|немає за що|радий допомогти|рада допомогти|як справи|як ти|нормально
чим можу допомогти|звертайтеся|ще раз
"""
FILLER: frozenset[tuple[str, ...]] = frozenset(
    tuple(phrase.split()) for line in _PHRASES.split("\n") for phrase in line.split("|")
    if phrase.strip())
_LONGEST = max(len(p) for p in FILLER)
_LAUGH = re.compile(r"^(?:(?:ha)+h?|(?:he)+|(?:ах)+а?|(?:ха)+|(?:хе)+|lo+l|hm+|м+|a+h+)$")
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")


def is_filler(text: str) -> bool:
    """Whether the turn says nothing worth remembering (greeting, thanks, acknowledgement)."""
    lowered = text.lower().replace("\u2019", "'").replace("ё", "е")
    if any(c.isdigit() for c in lowered):
        return False
    words = [w for w in _WORD.findall(lowered) if not _LAUGH.match(w)]
    at = 0
    while at < len(words):
        for size in range(min(_LONGEST, len(words) - at), 0, -1):
            if tuple(words[at:at + size]) in FILLER:
                at += size
                break
        else:
            return False
    return True


def salient(turns: Sequence[Turn]) -> list[Turn]:
    """The turns worth extracting from; none means the batch has no content."""
    return [t for t in turns if not is_filler(t.text)]

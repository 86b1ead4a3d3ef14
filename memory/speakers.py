"""Whom a question is about, told by how the history addresses the names it holds.

A chat between two people, imported, is one side as `user` and the other as `assistant`. A
question about one of them ("What phobia does David have?") is answered by that person's own
messages, in the first person, while the other side's small talk holds the same kinds of
things ("my neighbour's parrot"). Nobody addresses themselves; the other side does: "Hey
David!", "Thanks, David". So a name one side addresses far more often than the other does is the
other side's. A person both address, or only speak of ("I met Tom at work"), tells nothing; nor
does a chat with an assistant, which seldom names anyone. A history whose messages carry their
speaker's name as a label ("David: ...") tells it the other way round, and the label wins.

Only the names the history is full of (RecallConfig.name_rows) are asked about, among the
newest rows (memory/recall_store.py `_names_held`). A question naming both sides, or none the
history tells, is about nobody in particular.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memory.ranking import Side

# A name addressed, as a Postgres regular expression (case aside) over a message with the name
# `w` (SQL): opening the message, after a time of day that opens it, or after a greeting, and
# before a comma, a stop or the end ("David, ...", "Evening, David.", "Hey David!", "Спасибо,
# Аня!"); or closing a clause with a call or a question ("Long time, David!", "How are you,
# Anna?"); not a person spoken of ("dinner with my wife, Anna.", "This morning Anna, the kids").
_GREETINGS = ("hi|hey|hello|hiya|yo|thanks|thank you|cheers|bye|привет|здравствуй|"
              "здравствуйте|спасибо|пока|привіт|вітаю|дякую|бувай")
_OPENING = "(good\\s+)?(morning|afternoon|evening|night)\\s*[,!]?\\s*"
ADDRESSED = (f"'(^\\s*({_OPENING})?|\\m({_GREETINGS})[,!]?\\s+)' || w || "
             "'\\M\\s*([,!?.]|$)|,\\s*' || w || '\\M\\s*[!?]'")
# A name tells a side once addressed (or labelling) at least SAID times among the newest rows,
# and LEAN times as often on one side as on the other.
SAID = 3
LEAN = 3


@dataclass(frozen=True)
class Addressed:
    """How often one name is addressed among a user's newest rows, by each side, and how often
    it opens a message of each side as its label ("Anna: ...")."""

    by_user: int
    by_assistant: int
    user_labels: int = 0
    assistant_labels: int = 0
    # messages of each side that hold the name at all, addressed or not
    user_mentions: int = 0
    assistant_mentions: int = 0

    def side(self) -> Side | None:
        """The side this name is of, if the history tells: the other side addresses it, and
        it is the other side that writes it at all, as people seldom write their own name (an
        assistant that echoes the user's partner's name tells nothing)."""
        if self.user_labels + self.assistant_labels >= SAID:
            return _leaning(self.user_labels, self.assistant_labels)
        by = _leaning(self.by_user, self.by_assistant)
        if by is None or _leaning(self.user_mentions, self.assistant_mentions) != by:
            return None
        return "assistant" if by == "user" else "user"


def _leaning(user: int, assistant: int) -> Side | None:
    if user + assistant < SAID:
        return None
    if user >= LEAN * assistant:
        return "user"
    if assistant >= LEAN * user:
        return "assistant"
    return None


def about(names: Iterable[Addressed]) -> Side | None:
    """The one side the names tell, or None if they tell none or both."""
    sides = {side for said in names if (side := said.side()) is not None}
    return sides.pop() if len(sides) == 1 else None

"""Recall ranking: fusion, recency, weights, near-duplicate collapse, the token cut. Pure, but
for memos of the words and key terms of rows it read (`_WORDS`, `_TERMS`).

    dense list ─┐
                ├─ reciprocal rank fusion ─ × recency ─ × weight ─ collapse ─ cut to budget
  keyword list ─┘

Candidates come from memory/recall_store.py: past messages of the user and their durable facts,
and (memory/event_recall.py) their events and entity cards, each with its rank in the dense
(pgvector) and keyword (full-text) lists of its source it appeared in.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Literal

from llm.ports import Embedding
from memory.facts import key_terms

Source = Literal["message", "fact", "event", "entity"]
Mode = Literal["hybrid", "dense", "keyword"]
Side = Literal["user", "assistant"]  # of a conversation: whose messages


@dataclass(frozen=True)
class RecallConfig:
    """Every knob of recall; the defaults are what the recall benchmark was tuned with."""

    enabled: bool = True
    mode: Mode = "hybrid"
    candidates: int = 30  # per list: dense messages, keyword messages, dense facts, keyword facts
    keyword_scan: int = 500  # the newest full-text matches ranked, per source
    bm25_k1: float = 1.2  # keyword ranking: how fast more of a term stops counting...
    bm25_b: float = 0.75  # ...and how much a long row is marked down
    # The relevance floor: an item is a candidate only if its cosine similarity to the query, or
    # its keyword score (BM25) as a share of the best keyword match's, reaches these. An empty
    # fence beats a noisy one.
    min_similarity: float = 0.1
    min_keyword: float = 0.3
    rrf_k: int = 60
    # Both lists search with the question less the capitalised words (not its first word, nor
    # "I") that at least this many of the user's messages hold: the names of the people the
    # history is full of. A question about Anna names her; the messages that answer it are her
    # own, in the first person, and the ones with her name are greetings ("Hi Anna, long
    # time!"), nearer to any question that names her than the evidence, and short, which BM25
    # favours (bench/README.md, longer conversations: hybrid R@10 0.503 -> 0.647 at ~600 turns a
    # conversation). 0: the question as it is.
    name_rows: int = 4
    # A message is also found through the current facts drawn from it (their
    # `source_message_ids`: of the span the memory flush read, the messages that say the fact,
    # memory/facts.py `drawn_from`): in each list, it takes the better of its own rank and the
    # best such fact's (memory/recall_store.py). The facts the flush writes become extra keys
    # for the turns they came from, in the words of the extraction rather than of the chat
    # (bench/README.md, fact expansion). A fact naming more than `expansion_sources` messages is
    # the key of none: each would rise to its rank.
    fact_expansion: bool = True
    expansion_sources: int = 5
    dense_weight: float = 1.0
    keyword_weight: float = 1.0
    freshness_days: float = 14.0  # no decay inside this window
    half_life_days: float = 90.0  # then the recency factor halves every half-life...
    # ...down to this floor. 1.0: no decay, unless the question names a moment (below). Decay
    # buried the old evidence that questions about long conversations ask for: R@10 0.52 with a
    # floor of 0.35 against 0.60 without, on held-out data measured from outside (issue #26);
    # the project's own synthetic sets, which plant updated facts, gain 0.01-0.03 from it.
    recency_floor: float = 1.0
    # A question that names a moment ("in May", "two weeks ago": memory/time_focus.py) measures
    # recency from that moment, decaying to this floor (or the one above, if lower).
    focus_floor: float = 0.5
    fact_weight: float = 1.3  # a durable fact outranks a message of the same relevance
    # The other side of the conversation weighs as much: in a chat imported between two people,
    # or an assistant that restates what it was told, half the evidence is there (0.8 lost 0.04
    # of R@10 on the long-conversation set, and gained 0.01 on the first synthetic set).
    assistant_weight: float = 1.0
    user_weight: float = 1.0  # and a user's message (a fact's and an event's are their own)
    # A question about one side of the conversation (the person it names, as the history speaks
    # of them: memory/speakers.py) weighs the other side's messages by this too. 1.0: both alike.
    speaker_weight: float = 0.6
    # Events and entity cards (memory/events/) are recalled beside messages and facts, each
    # source with its own dense and keyword lists, weighed by its type: `type_weights` (an event
    # or entity type and its weight), else the source's weight. A card is what the user's events
    # came to, so it outranks a message of the same relevance, as a fact does.
    events: bool = True
    event_weight: float = 1.0
    entity_weight: float = 1.3
    type_weights: tuple[tuple[str, float], ...] = ()
    # The keyword graph: events reached through the `graph_keywords` keywords nearest the
    # question, a third list of the events fused with the other two (memory/event_recall.py).
    graph: bool = True
    graph_weight: float = 1.0
    graph_keywords: int = 8
    # Late-interaction rerank of the events found (memory/late_interaction.py): their token
    # vectors against the question's, by MaxSim, a fourth list in the fusion. Off by default:
    # it needs the built-in embedder (an embedder server gives no token vectors).
    rerank: bool = False
    rerank_weight: float = 1.0
    duplicate_overlap: float = 0.9  # share of words two items have in common to be one
    budget_tokens: int = 600
    max_items: int = 10
    item_max_chars: int = 1200  # a longer message stands in the fence as its first part


@dataclass(frozen=True)
class Candidate:
    id: uuid.UUID
    source: Source
    text: str
    created_at: datetime
    role: str  # user / assistant for messages, "fact" for facts, the type of an event or entity
    chat_id: uuid.UUID | None = None
    importance: float = 0.5
    # 1-based rank in its dense list; for a message, the better of its own and that of the best
    # fact drawn from it (fact expansion), and the similarity or score that goes with that rank
    dense_rank: int | None = None
    keyword_rank: int | None = None
    similarity: float | None = None  # cosine similarity to the query, in the dense list
    keyword_score: float | None = None  # BM25 score, in the keyword list
    # An event's rank and score in the keyword graph's list (memory/event_recall.py)
    graph_rank: int | None = None
    graph_score: float | None = None
    # An event's token vectors, packed (memory/late_interaction.py), and the rerank's rank and
    # MaxSim score of it among the candidates that have them
    tokens: bytes | None = field(default=None, repr=False)
    late_rank: int | None = None
    late_score: float | None = None


@dataclass(frozen=True)
class Recalled:
    """One item of the fence, with the score of each component: why it was recalled."""

    id: uuid.UUID
    source: Source
    text: str
    created_at: datetime
    role: str
    chat_id: uuid.UUID | None
    tokens: int
    scores: dict[str, float | int | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "id": str(self.id), "source": self.source, "role": self.role, "text": self.text,
            "created_at": self.created_at.isoformat(),
            "chat_id": str(self.chat_id) if self.chat_id else None,
            "tokens": self.tokens, "scores": self.scores,
        }


@dataclass(frozen=True)
class Question:
    """A question as recall searches with it. `words`: the question less the names its user's
    history is full of (RecallConfig.name_rows), or as asked; both lists search with them.
    `vector`: their embedding (None when recall searches by words alone). `asked`: the vector of
    the question as asked, kept only where the embedder hands it on as the message's own.
    `name_rows` and `mode` are the settings it was made under, `names_ms` the time of the
    names' statement. `about`: the side of the conversation whose person the question names
    (memory/speakers.py), if the history tells."""

    words: str
    vector: Embedding | None
    asked: Embedding | None
    name_rows: int
    mode: Mode
    names_ms: float = 0.0
    about: Side | None = None


@dataclass(frozen=True)
class RecallQuery:
    """What one recall asks: whose memory, for which text, and what not to bring back."""

    tenant_id: str
    user_id: str
    text: str
    exclude: tuple[uuid.UUID, ...] = ()  # rows the window already shows
    # A chat, a position and that row's time: the chat's rows from there on are in the window.
    shown_from: tuple[uuid.UUID, int, datetime] | None = None
    # A chat and the time of its "start over" line: its rows before that stay forgotten.
    hide: tuple[uuid.UUID, datetime] | None = None
    budget_tokens: int | None = None  # lower than the config's: what the prompt has room for
    question: Awaitable[Question] | None = None  # made earlier (Recaller.question)
    now: datetime | None = None  # recency is measured from here (tests, replays)
    # The chat's assistant: of the cards grouped by user and assistant, only its own come back
    # (memory/events/segments.py assistant_key). None: every assistant's (a memory search).
    assistant: str | None = None


@dataclass(frozen=True)
class RecallResult:
    items: list[Recalled]
    query: str
    mode: str
    candidates: int  # rows the search returned before ranking
    timings: dict[str, float] = field(default_factory=dict)
    # The query's vector, as the query text's own, and the embedder's name: given when the
    # embedder embeds searches and texts alike, so a step can store it for its message.
    text_vector: tuple[str, Embedding] | None = None


def rrf(rank: int | None, k: int) -> float:
    return 0.0 if rank is None else 1.0 / (k + rank)


def recency(created_at: datetime, now: datetime, config: RecallConfig) -> float:
    """1 inside the freshness window around `now`; then exponential decay with the half-life, to
    a floor. `now` is the moment the question asks about (memory/time_focus.py), so an item from
    after it is as far from it as one from before."""
    age_days = abs((now - created_at).total_seconds()) / 86400
    over = max(age_days - config.freshness_days, 0.0)
    decay = 0.5 ** (over / config.half_life_days) if config.half_life_days > 0 else 0.0
    return config.recency_floor + (1 - config.recency_floor) * decay


def weight(candidate: Candidate, config: RecallConfig) -> float:
    """Importance (0..1, 0.5 neutral) scaled around 1, times the weight of the source (of an
    event's or entity's type, when `type_weights` names it)."""
    if candidate.source == "fact":
        base = config.fact_weight
    elif candidate.source == "event" or candidate.source == "entity":
        base = _type_weight(config.type_weights, candidate.role, config.event_weight
                            if candidate.source == "event" else config.entity_weight)
    else:
        base = config.assistant_weight if candidate.role == "assistant" else config.user_weight
    return base * (0.5 + candidate.importance)


def about_side(side: Side | None, config: RecallConfig) -> RecallConfig:
    """The config for a question about `side`: the other side's messages weigh
    `speaker_weight` times their own weight."""
    if side is None or config.speaker_weight == 1.0:
        return config
    if side == "user":
        return replace(config, assistant_weight=config.assistant_weight * config.speaker_weight)
    return replace(config, user_weight=config.user_weight * config.speaker_weight)


@lru_cache(maxsize=1024)
def _type_weight(weights: tuple[tuple[str, float], ...], type_: str, otherwise: float) -> float:
    return next((w for name, w in weights if name == type_), otherwise)


@dataclass(frozen=True)
class _Parts:
    dense: float
    keyword: float
    graph: float
    late: float
    recency: float
    weight: float
    total: float


def _parts(candidate: Candidate, now: datetime, config: RecallConfig) -> _Parts:
    """Each list's share of the fusion, recency, weight and their total."""
    dense = config.dense_weight * rrf(candidate.dense_rank, config.rrf_k)
    keyword = config.keyword_weight * rrf(candidate.keyword_rank, config.rrf_k)
    graph = config.graph_weight * rrf(candidate.graph_rank, config.rrf_k) if config.graph else 0.0
    late = config.rerank_weight * rrf(candidate.late_rank, config.rrf_k) if config.rerank else 0.0
    if config.mode == "dense":
        keyword = 0.0
    elif config.mode == "keyword":
        dense = 0.0
    fresh = recency(candidate.created_at, now, config)
    w = weight(candidate, config)
    return _Parts(dense, keyword, graph, late, fresh, w,
                  (dense + keyword + graph + late) * fresh * w)


def _scores(candidate: Candidate, parts: _Parts) -> dict[str, float | int | None]:
    """Why an item was recalled: each search's own measure and rank (cosine similarity, BM25,
    the keyword graph's score for an event), what rank fusion made of them, recency, weight and
    the total."""

    def raw(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    scores: dict[str, float | int | None] = {
        "dense": raw(candidate.similarity), "dense_rank": candidate.dense_rank,
        "keyword": raw(candidate.keyword_score), "keyword_rank": candidate.keyword_rank,
    }
    if candidate.source == "event":
        scores.update(graph=raw(candidate.graph_score), graph_rank=candidate.graph_rank)
        if candidate.late_rank is not None:
            scores.update(late=raw(candidate.late_score), late_rank=candidate.late_rank)
    scores.update(fused=round(parts.dense + parts.keyword + parts.graph + parts.late, 6),
                  recency=round(parts.recency, 4), weight=round(parts.weight, 4),
                  total=round(parts.total, 6))
    return scores


def rank(
    candidates: list[Candidate],
    now: datetime,
    config: RecallConfig,
    count_tokens: Callable[[str], int],
) -> list[Recalled]:
    """Fuse, weigh, collapse near-duplicates (most words in common: the better-ranked one stays),
    cut to the budget.

    Walks the candidates best first and stops once the fence is full, so the cost is bounded by
    what is kept, not by how many candidates came back (~120 come back; ~10 are kept, and only
    those get their scores written out)."""
    scored = [(parts, c) for c in candidates if (parts := _parts(c, now, config)).total > 0]
    # (The id last: a tie is broken as the statement breaks it, memory/recall_store.py.)
    scored.sort(key=lambda pair: (-pair[0].total, pair[1].created_at, pair[1].id))
    out: list[Recalled] = []
    kept: list[tuple[frozenset[str], Candidate]] = []  # the words and the row of each kept
    used = 0
    for parts, candidate in scored:
        if len(out) >= config.max_items or used >= config.budget_tokens:
            break
        text = _snippet(candidate.text, config.item_max_chars)
        if used + len(text.split()) > config.budget_tokens:
            # Cannot fit, and no tokenizer is needed to know: tokenizers split at whitespace
            # first, so every word is at least one token. (A full prompt leaves little room,
            # and then most candidates end here.)
            continue
        words, terms = _WORDS.of(candidate), _TERMS.of(candidate)
        limit = config.duplicate_overlap
        # (The key terms first: two sets from the memo, where the overlap makes a new one.)
        if any(terms == _TERMS.of(said) and _overlap(words, other) >= limit
               for other, said in kept):
            continue  # the same thing said again; a different number or name is not
        tokens = count_tokens(text)
        if used + tokens > config.budget_tokens:
            continue  # a shorter item further down may still fit
        used += tokens
        kept.append((words, candidate))
        out.append(Recalled(candidate.id, candidate.source, text, candidate.created_at,
                            candidate.role, candidate.chat_id, tokens, _scores(candidate, parts)))
    return out


class _RowMemo:
    """A word set of each row ranked before: its key terms, or its words. A user's rows come back
    step after step, and these cost more than the rest of the ranking (the key terms: session 7;
    the words, 11 us of regular expression for a 30-word row: session 11, bench/HISTORY.md).
    Keyed by the row and its text's hash, since a fact's text can change; bounded by the words
    it holds, the oldest going first."""

    def __init__(self, of_text: Callable[[str], frozenset[str]], max_terms: int) -> None:
        self.of_text, self.max_terms = of_text, max_terms
        self.held = 0  # words held, plus one a row
        self._rows: dict[tuple[uuid.UUID, int], frozenset[str]] = {}

    def of(self, candidate: Candidate) -> frozenset[str]:
        key = (candidate.id, hash(candidate.text))
        terms = self._rows.get(key)
        if terms is None:
            terms = self._rows[key] = self.of_text(candidate.text)
            self.held += len(terms) + 1
            while self.held > self.max_terms:
                self.held -= len(self._rows.pop(next(iter(self._rows)))) + 1
        return terms


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))  # (a match begins and ends with a letter)


_TERMS = _RowMemo(key_terms, max_terms=200_000)  # a few MB each
_WORDS = _RowMemo(_words, max_terms=200_000)


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two word sets: 1 for the same words in any order or case."""
    if not a or not b:
        return 1.0 if a == b else 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)  # the union's size, without making the union


def _snippet(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut + " …"


_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*", re.UNICODE)
_CYRILLIC = re.compile(r"[\u0400-\u04FF]")
_MAX_TERMS = 32


@dataclass(frozen=True)
class KeywordQuery:
    """A question's keyword search: the full-text query that finds the rows, and the terms
    that score them (memory/recall_store.py, BM25)."""

    tsquery: str  # for `to_tsquery('jin_search', ...)`: any of the terms
    words: tuple[str, ...]  # each term's word, stemmed in Postgres as the rows were
    prefix: tuple[bool, ...]  # whether that term matches every word it begins


def keyword_query(text: str) -> KeywordQuery | None:
    """The search for any word of the text, or None when it has no word.

    Words are quoted, so no operator in the text reaches the parser. Cyrillic words also match
    by prefix, since Postgres has no Ukrainian stemmer and the Russian one misses Ukrainian
    forms: a word of five letters or more by its first letters (Одеса / Одесі), and a word
    whose last syllable has і or ї by the form where that vowel alternates (Львів / Львова,
    Львові; Київ / Києва).
    """
    terms: list[tuple[str, bool]] = []
    seen: set[tuple[str, bool]] = set()
    for match in _WORD.finditer(text.lower()):
        word = match.group(0).replace("'", "").replace("’", "")
        for term in _terms(word):
            if term not in seen:
                seen.add(term)
                terms.append(term)
    if not terms:
        return None
    terms = terms[:_MAX_TERMS]
    tsquery = " | ".join(f"'{w}':*" if prefix else f"'{w}'" for w, prefix in terms)
    return KeywordQuery(tsquery, tuple(w for w, _ in terms), tuple(p for _, p in terms))


# The last syllable's і or ї, closed by consonants: the vowel that alternates in Ukrainian
# inflection (Львів -> Львова, ніч -> ночі, Київ -> Києва).
_CLOSED_I = re.compile(r"[ії]([^аеєиіїоуюяь]+)$")
_ALTERNATES = {"і": ("о", "е"), "ї": ("є",)}


@lru_cache(maxsize=65_536)  # a step's question is mostly words asked before
def _terms(word: str) -> tuple[tuple[str, bool], ...]:
    parts = [p for p in word.split("-") if p]
    out = [(p, False) for p in parts]
    for p in parts:
        if not _CYRILLIC.search(p):
            continue
        if len(p) >= 5:
            out.append((p[: max(4, len(p) - 2)], True))
        closed = _CLOSED_I.search(p)
        if closed and len(p) >= 4:
            vowel, at = p[closed.start()], closed.start()
            out.extend((p[:at] + other + p[at + 1:], True) for other in _ALTERNATES[vowel])
    return tuple(out)


def render(item: Recalled) -> str:
    """One line of the fence: its date and source first, so the model can judge it."""
    day = item.created_at.date().isoformat()
    if item.source == "fact":
        origin = f"fact {item.id}"  # whole: the `forget` tool takes it as it stands here
    elif item.source == "event":
        origin = f"event {item.role}"
    elif item.source == "entity":
        origin = f"{item.role} card"
    else:
        origin = f"{item.role} in chat {str(item.chat_id)[:8]}"
    text = " ".join(item.text.split())
    return f"- [{day} · {origin}] {text}"


"""The minimum relevance of a recall part: which search hits are worth a part of their own.

Search always finds something (with the local model, every message gets hits), so a hit
goes into a user message's recall part only when the memory and the message share words:
two or more, or a tool of a category the message names ("which package manager?" and
"We use pnpm", the query expansion's lexicon, :mod:`opencode_memoryd.store.expansion`),
or one when the message is a question. Words are content words
(:func:`~opencode_memoryd.extract.facts.content_words`: case-folded, English stopwords
out); two words match when they are the same or one starts with the other and the
shorter has at least :data:`MIN_PREFIX` letters ("test" and "tests", "deploy" and
"deploys").

Chosen on the natural-query fixtures by ``bench/recall_relevance.py`` (138 questions with
the memory that answers them, 90 messages that ask nothing: "thanks", "run the tests
again", "fix the typo in line 3"): see that bench and the README for the numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from opencode_memoryd.extract.facts import content_words
from opencode_memoryd.models import Memory
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.store.expansion import default_lexicon

#: The shortest word that matches the longer words it starts.
MIN_PREFIX = 4
#: First words of a question (besides a final ``?``).
QUESTION_START = frozenset({"what", "which", "how", "where", "who", "whom", "when", "why",
                            "can", "could", "should", "may", "might", "must", "shall",
                            "is", "are", "was", "were", "do", "does", "did", "will", "would",
                            "have", "has"})


def alike(a: str, b: str) -> bool:
    """Whether two content words match: equal, or the shorter (at least
    :data:`MIN_PREFIX` letters) starts the longer."""
    short, long = sorted((a, b), key=len)
    return short == long or (len(short) >= MIN_PREFIX and long.startswith(short))


def prefixes(words: Iterable[str]) -> frozenset[str]:
    """The proper prefixes of ``words`` that match the word they start (:func:`alike`): of
    :data:`MIN_PREFIX` letters up to one less than the word."""
    return frozenset(w[:k] for w in words for k in range(MIN_PREFIX, len(w)))


@dataclass(frozen=True)
class Words:
    """A set of content words made for :func:`alike` look-ups in time linear in a word's
    length: ``words`` and their :func:`prefixes`."""

    words: frozenset[str]
    starts: frozenset[str]

    @classmethod
    def of(cls, words: frozenset[str]) -> Words:
        """The set ``words``."""
        return cls(words, prefixes(words))

    def match(self, word: str) -> bool:
        """Whether ``word`` is :func:`alike` one of the words: the same as ``any(alike(word,
        w) for w in self.words)``."""
        return (word in self.words or word in self.starts
                or any(word[:k] in self.words for k in range(MIN_PREFIX, len(word))))


def is_question(text: str) -> bool:
    """Whether ``text`` asks: it ends with ``?`` or its first word starts a question."""
    t = text.strip().casefold()
    first = t.split(None, 1)[0].strip(",.:;!") if t else ""
    return t.endswith("?") or first in QUESTION_START


@dataclass(frozen=True)
class Message:
    """What the rule needs of a user message: its content words, the content words of the
    tools of the categories it names, and whether it is a question."""

    words: frozenset[str]
    expansion: frozenset[str]
    question: bool
    expanded: Words = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "expanded", Words.of(self.expansion))

    @classmethod
    def of(cls, text: str) -> Message:
        """The message ``text`` (any length; the caller cuts it)."""
        words = content_words(text)
        members = default_lexicon().members_for(text)
        expansion = frozenset(w for m in members for w in content_words(m)) - words
        return cls(words, expansion, is_question(text))

    def supports(self, memory_text: str) -> bool:
        """Whether a memory whose text is ``memory_text`` is relevant enough for a part."""
        mine = content_words(memory_text)
        if any(self.expanded.match(m) for m in mine):
            return True
        shared = self.shared(mine)
        return shared >= 2 or (shared >= 1 and self.question)

    def shared(self, mine: frozenset[str]) -> int:
        """How many of the message's words are :func:`alike` a word of ``mine`` (a
        memory's content words): those equal to one or starting with one, then those one
        starts; in time linear in the words' lengths."""
        found = {w for w in self.words
                 if w in mine or any(w[:k] in mine for k in range(MIN_PREFIX, len(w)))}
        found.update(m[:k] for m in mine for k in range(MIN_PREFIX, len(m))
                     if m[:k] in self.words)
        return len(found)

    def can_support(self) -> bool:
        """Whether some memory could be relevant enough (:meth:`supports`): the message
        names a category of tools, has two content words, or is a question with one. A
        message that cannot ("thanks", "ok") needs no search."""
        return bool(self.expansion) or len(self.words) >= 2 or (
            len(self.words) >= 1 and self.question)


def task_hits(store: MemoryStore, flts: Sequence[MemoryFilter], query: str, *, limit: int,
              exclude: set[str], entries: int) -> list[Memory]:
    """The context block's "relevant to the task" memories for ``query`` (the session's
    first message): the best ``limit`` search hits of each scope in ``flts``, best first
    (ties by id), without ``exclude`` (what the block shows anyway), the agent's notes and
    pending notes (spent last in the block: an agent could write notes that outrank the
    user's for any task), and hits not relevant enough (:meth:`Message.supports`); at most
    ``entries`` of them."""
    message = Message.of(query)
    if not message.can_support():
        return []
    hits: dict[str, tuple[Memory, float]] = {}
    for flt in flts:
        for m, score in store.search(query, flt=flt, limit=limit):
            if m.id not in hits or hits[m.id][1] < score:
                hits[m.id] = (m, score)
    ranked = sorted(((m, s) for m, s in hits.values()
                     if m.provenance != "agent" and not m.pending
                     and m.id not in exclude and message.supports(m.content)),
                    key=lambda h: (-h[1], h[0].id))
    return [m for m, _ in ranked[:entries]]


__all__ = ["MIN_PREFIX", "QUESTION_START", "Message", "Words", "alike", "is_question",
           "prefixes", "task_hits"]

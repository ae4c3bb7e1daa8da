"""Query expansion by category: a question that names a kind of tool also searches for the
tools of that kind.

"Which package manager?" shares no word with "We always use pnpm": BM25 cannot find it, and
a small embedding model ranks it low. This is thesaurus-based query expansion (Voorhees,
"Query Expansion Using Lexical-Semantic Relations", SIGIR 1994; Manning, Raghavan &
Schütze, *Introduction to Information Retrieval*, 2008, section 9.2.2, "Automatic thesaurus
generation" and manual thesauri): a lexicon of developer-tool categories
(``categories.toml`` beside this module: for each category, the phrases a question names it
by and the common members of the category, written from general knowledge of the
ecosystems) is matched against the query, and the members of every category it names are
added to the BM25 query at :data:`EXPANSION_WEIGHT`, below the question's own words
(weight 1). The dense side's query vector blends the question's own vector with that of
its first :data:`DENSE_MEMBERS` members ("pnpm, npm, yarn, ..."; :func:`blend`), which is
computed once per members text (:class:`MembersVectors`): the model embeds only the
question's words, so a search costs no more model time than one without expansion. A query
that names no category is searched exactly as before.

Phrase matching works on words (letters, digits and ``+#./_-`` inside a word), lowercase,
after a light suffix strip applied alike to the query and to the phrases (``-ies`` to
``-y``; ``-ing``, ``-ed``, ``-s`` dropped when three letters or more remain), so "linters",
"deploying" and "deployed" match "linter" and "deploy".
"""

from __future__ import annotations

import math
import re
import threading
import tomllib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from opencode_memoryd.store.bm25 import Bm25Encoder, SparseVector

#: BM25 query weight of an added member term (the question's own terms weigh 1.0). Chosen
#: on the development questions of ``bench/natural_queries.py`` (see README, "Search and
#: embeddings").
EXPANSION_WEIGHT = 0.5
#: Categories expanded at most, the first ones the query names: a long query (a session's
#: first message, searched for the context block) may name many, and each adds up to ~100
#: terms.
MAX_CATEGORIES = 3
#: Members the dense side's query text names (the first ones of the lexicon's order, the
#: commonest first). Chosen on the same questions.
DENSE_MEMBERS = 8
#: Weight of the members' vector added to the question's own (:func:`blend`).
DENSE_MEMBERS_WEIGHT = 1.0
#: Members texts whose vectors :class:`MembersVectors` keeps.
MEMBERS_CACHE_SIZE = 128

_WORD = re.compile(r"[a-z0-9][a-z0-9+#./_-]*")
_SUFFIXES = (("ies", "y"), ("ing", ""), ("ed", ""), ("s", ""))


def _stem(word: str) -> str:
    word = word.rstrip("./_-")
    if word.endswith("ss"):
        return word
    for suffix, repl in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + repl
    return word


def words(text: str) -> tuple[str, ...]:
    """``text``'s words for phrase matching: lowercase, lightly stemmed, in order."""
    return tuple(_stem(w) for w in _WORD.findall(text.lower()))


@dataclass(frozen=True, slots=True)
class Category:
    """One category: its ``name``, the ``phrases`` a question names it by (each as its
    :func:`words`) and its ``members`` (tool names as written)."""

    name: str
    phrases: tuple[tuple[str, ...], ...]
    members: tuple[str, ...]


class CategoryLexicon:
    """Categories and the phrases that name them, indexed by a phrase's first word.

    Args:
        categories: the categories, in the order their members are added.

    Raises:
        ValueError: a category has no phrase or no member, or a phrase has no word.
    """

    def __init__(self, categories: Iterable[Category]) -> None:
        self.categories = tuple(categories)
        self._by_first: dict[str, list[tuple[tuple[str, ...], int]]] = {}
        for i, c in enumerate(self.categories):
            if not c.phrases or not c.members:
                raise ValueError(f"category {c.name!r} needs at least one phrase and member")
            for phrase in c.phrases:
                if not phrase:
                    raise ValueError(f"category {c.name!r} has a phrase without a word")
                self._by_first.setdefault(phrase[0], []).append((phrase, i))

    @classmethod
    def from_toml(cls, text: str) -> CategoryLexicon:
        """A lexicon from TOML text: ``[[category]]`` tables with ``name`` (string),
        ``phrases`` and ``members`` (lists of strings).

        Raises:
            ValueError: the text is not TOML, or a table lacks a field or has the wrong type
                (``tomllib.TOMLDecodeError`` is a ``ValueError``).
        """
        data = tomllib.loads(text)
        out = []
        for n, table in enumerate(data.get("category", []), start=1):
            name, phrases, members = (table.get(k) for k in ("name", "phrases", "members"))
            if not isinstance(name, str) or not _strings(phrases) or not _strings(members):
                raise ValueError(f"category {n}: needs a name and lists of strings "
                                 "'phrases' and 'members'")
            out.append(Category(name, tuple(words(p) for p in phrases),
                                tuple(dict.fromkeys(m.strip() for m in members if m.strip()))))
        return cls(out)

    def named_in(self, query: str) -> list[Category]:
        """The categories a phrase of which occurs in ``query`` (on word boundaries), each
        once, in the order the query first names them (ties: lexicon order)."""
        q = words(query)
        found: dict[int, int] = {}
        for start, word in enumerate(q):
            for phrase, i in self._by_first.get(word, ()):
                if q[start:start + len(phrase)] == phrase:
                    found.setdefault(i, start)
        return [self.categories[i] for i in sorted(found, key=lambda i: (found[i], i))]

    def members_for(self, query: str, *, most: int = MAX_CATEGORIES) -> list[str]:
        """The members of the first ``most`` categories named in ``query``, in lexicon
        order, first occurrence only (``[]``: the query names no category)."""
        first = self.named_in(query)[:most]
        named = [c for c in self.categories if c in first]  # in lexicon order
        return list(dict.fromkeys(m for c in named for m in c.members))


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


@lru_cache(maxsize=1)
def default_lexicon() -> CategoryLexicon:
    """The lexicon of ``categories.toml`` in this package (read once per process).

    Raises:
        ValueError: the packaged file is malformed.
    """
    text = resources.files("opencode_memoryd.store").joinpath("categories.toml").read_text(
        "utf-8")
    return CategoryLexicon.from_toml(text)


def expanded_sparse(encoder: Bm25Encoder, query: str, members: Sequence[str], *,
                    weight: float = EXPANSION_WEIGHT) -> SparseVector:
    """The BM25 query vector of ``query`` (weight 1.0 per term) plus the terms of
    ``members`` not already in it, at ``weight``. Without members: ``query``'s own vector."""
    own = encoder.embed_query(query)
    if not members:
        return own
    extra = encoder.embed_query(" ".join(members))
    seen = set(own.indices)
    added = [i for i in extra.indices if i not in seen]
    return SparseVector(own.indices + added, own.values + [weight] * len(added))


def dense_members(members: Sequence[str], *, count: int = DENSE_MEMBERS) -> str:
    """The text the dense side embeds for the members of a query's categories: its first
    ``count`` members ("pnpm, npm, yarn, ..."); ``""`` without members."""
    return ", ".join(members[:count]) if count > 0 else ""


def expand_query(encoder: Bm25Encoder, query: str, *, expand: bool = True,
                 sparse: bool = True) -> tuple[SparseVector, str]:
    """What the store searches with for ``query``: the BM25 query vector
    (:func:`expanded_sparse` at :data:`EXPANSION_WEIGHT`; empty when ``sparse`` is false)
    and the members text of the dense side (:func:`dense_members`), with the members of the
    categories ``query`` names in :func:`default_lexicon`. With ``expand`` false, or a query
    naming no category: ``query``'s own vector and ``""``.
    """
    members = default_lexicon().members_for(query) if expand else []
    vector = (expanded_sparse(encoder, query, members, weight=EXPANSION_WEIGHT) if sparse
              else SparseVector([], []))
    return vector, dense_members(members, count=DENSE_MEMBERS)


def blend(question: Sequence[float], members: Sequence[float], *,
          weight: float = DENSE_MEMBERS_WEIGHT) -> list[float]:
    """The dense query vector of an expanded question: ``question + weight * members``
    (both unit vectors), L2-normalised. Mean pooling makes the embedding of a text close to
    the token-weighted mean of its parts' embeddings, so this stands for embedding the
    question followed by its members, while the members' vector, the same for every question
    naming the same categories, is computed once (:class:`MembersVectors`) and the model
    embeds only the question's own tokens."""
    out = [q + weight * m for q, m in zip(question, members, strict=True)]
    norm = math.sqrt(sum(x * x for x in out)) or 1.0
    return [x / norm for x in out]


class MembersVectors:
    """Query vectors of members texts (:func:`dense_members`), by embedder name and text,
    the last :data:`MEMBERS_CACHE_SIZE` kept. Thread-safe."""

    def __init__(self) -> None:
        self._vectors: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, embedder: str, text: str) -> list[float] | None:
        """The kept vector of ``text`` for ``embedder``, or ``None``."""
        with self._lock:
            vector = self._vectors.get((embedder, text))
            if vector is not None:
                self._vectors.move_to_end((embedder, text))
            return vector

    def put(self, embedder: str, text: str, vector: list[float]) -> None:
        """Keep ``vector`` for ``text`` (the oldest dropped past the size)."""
        with self._lock:
            self._vectors[(embedder, text)] = vector
            while len(self._vectors) > MEMBERS_CACHE_SIZE:
                self._vectors.popitem(last=False)

    def query_vector(self, embed: Callable[[list[str]], list[list[float]]], embedder: str,
                     query: str, members: str) -> list[float]:
        """The dense query vector of ``query`` with its members text ``members``
        (:func:`expand_query`): ``embed([query])`` alone without members, else
        :func:`blend` of it and the members' vector, kept here (on a miss both texts go to
        ``embed`` in one call). ``embedder`` names the embedder ``embed`` calls.

        Raises:
            whatever ``embed`` raises, unchanged.
        """
        if not members:
            return embed([query])[0]
        kept = self.get(embedder, members)
        if kept is None:
            own, kept = embed([query, members])
            self.put(embedder, members, kept)
        else:
            own = embed([query])[0]
        return blend(own, kept)


__all__ = [
    "DENSE_MEMBERS",
    "DENSE_MEMBERS_WEIGHT",
    "EXPANSION_WEIGHT",
    "MAX_CATEGORIES",
    "Category",
    "CategoryLexicon",
    "MembersVectors",
    "blend",
    "default_lexicon",
    "dense_members",
    "expand_query",
    "expanded_sparse",
    "words",
]

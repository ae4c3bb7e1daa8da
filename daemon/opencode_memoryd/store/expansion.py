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
(weight 1); the dense side embeds the question followed by the first
:data:`DENSE_MEMBERS` members ("which package manager? (pnpm, npm, yarn, ...)"). A query
that names no category is searched exactly as before.

Phrase matching works on words (letters, digits and ``+#./_-`` inside a word), lowercase,
after a light suffix strip applied alike to the query and to the phrases (``-ies`` to
``-y``; ``-ing``, ``-ed``, ``-s`` dropped when three letters or more remain), so "linters",
"deploying" and "deployed" match "linter" and "deploy".
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Sequence
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


def dense_text(query: str, members: Sequence[str], *, count: int = DENSE_MEMBERS) -> str:
    """The text the dense side embeds for ``query``: the query, then its first ``count``
    members in parentheses ("which package manager? (pnpm, npm, yarn, ...)"); ``query``
    alone without members."""
    return f"{query} ({', '.join(members[:count])})" if members and count > 0 else query


def expand_query(encoder: Bm25Encoder, query: str, *, expand: bool = True,
                 sparse: bool = True) -> tuple[SparseVector, str]:
    """What the store searches with for ``query``: the BM25 query vector
    (:func:`expanded_sparse` at :data:`EXPANSION_WEIGHT`; empty when ``sparse`` is false)
    and the dense side's text (:func:`dense_text` with :data:`DENSE_MEMBERS` members), with
    the members of the categories ``query`` names in :func:`default_lexicon`. With
    ``expand`` false, or a query naming no category: ``query``'s own vector and ``query``.
    """
    members = default_lexicon().members_for(query) if expand else []
    vector = (expanded_sparse(encoder, query, members, weight=EXPANSION_WEIGHT) if sparse
              else SparseVector([], []))
    return vector, dense_text(query, members, count=DENSE_MEMBERS)


__all__ = [
    "DENSE_MEMBERS",
    "EXPANSION_WEIGHT",
    "MAX_CATEGORIES",
    "Category",
    "CategoryLexicon",
    "default_lexicon",
    "dense_text",
    "expand_query",
    "expanded_sparse",
    "words",
]

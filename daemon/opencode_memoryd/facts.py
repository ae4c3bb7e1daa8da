"""Text tests on memory facts: word similarity, identifiers, and restatement.

Used at write time (:func:`opencode_memoryd.pipeline.write_memories`: is a candidate a
near-duplicate of a stored memory?) and by dreams (:mod:`opencode_memoryd.dream`: may a
memory be retired into another one?). The rule both rely on: a text may stand in for
another only when it keeps **every identifier** of it (:func:`identifiers`) and, for a
near-exact duplicate, **every salient term** (the stemmed, stopword-free terms of the BM25
tokenizer, :mod:`opencode_memoryd.bm25`): "The metrics worker runs on Python 3.10." is
95% similar to "The webhook worker runs on Python 3.10." word for word, and a different
fact.
"""

from __future__ import annotations

import difflib
import re

from opencode_memoryd.bm25 import Bm25Encoder, default_encoder


def similarity(a: str, b: str) -> float:
    """Text similarity in [0, 1] of two normalised facts (difflib's ratio on words)."""
    return difflib.SequenceMatcher(None, a.split(), b.split()).ratio()


def salient_terms(text: str, encoder: Bm25Encoder | None = None) -> frozenset[int]:
    """The salient terms of ``text``: its stemmed, stopword-free BM25 token ids."""
    return frozenset((encoder or default_encoder()).embed_query(text).indices)


def restates(new: str, old: str, *, encoder: Bm25Encoder | None = None) -> bool:
    """Whether ``old`` already says all that ``new`` says: every salient term and every
    identifier of ``new`` is in ``old`` (word order, case, punctuation and stopwords may
    differ). Not symmetric: ``old`` may say more."""
    if missing_identifiers(new, old):
        return False
    return salient_terms(new, encoder) <= salient_terms(old, encoder)


_IDENT_STRIP = "\"'()[]{}<>,;!?*"
_NOT_IDENT = frozenset({"e.g", "i.e", "etc", "vs", "a.m", "p.m"})
_BACKTICKS = re.compile(r"`([^`]*)`")
_VOWELS = frozenset("aeiouy")


def _is_identifier(token: str) -> bool:
    if not token or token in _NOT_IDENT or not any(c.isalnum() for c in token):
        return False
    if any(c.isdigit() for c in token):
        return True
    if token[0] in "-/~." or any(c in token for c in "/\\_@#+:"):
        return True
    if "." in token.strip("."):
        return True
    if any(c.isupper() for c in token[1:]):
        return True
    low = token.lower()
    return len(low) >= 2 and low.isalpha() and not (set(low) & _VOWELS)


def _clean_token(raw: str) -> str:
    t = raw.strip(_IDENT_STRIP + "`")
    t = t.rstrip(".:")
    return t.strip(_IDENT_STRIP + "`")


def identifiers(text: str) -> set[str]:
    """The identifiers of a memory text, case-folded: every token inside backticks, and
    every other token that has a digit, a path or URL character (``/ \\ _ @ # + :``), an
    inner dot, a leading ``-``, ``/``, ``~`` or ``.``, a capital after its first letter,
    or is a lowercase word of two or more letters with no vowel (``npm``, ``ssh``).

    Tokens are split on whitespace and stripped of quotes, brackets and sentence
    punctuation (a trailing ``.`` or ``:`` too). Example: ``"Use `pnpm` 9.1 for /api/v2."``
    → ``{"pnpm", "9.1", "/api/v2"}``.
    """
    out: set[str] = set()
    for span in _BACKTICKS.findall(text):
        for raw in span.split():
            t = _clean_token(raw)
            if t:
                out.add(t.casefold())
    for raw in _BACKTICKS.sub(" ", text).split():
        t = _clean_token(raw)
        if _is_identifier(t):
            out.add(t.casefold())
    return out


def _contains_identifier(text_cf: str, ident: str) -> bool:
    """Whether the case-folded ``text_cf`` contains ``ident`` as a whole token."""
    pattern = r"(?<![\w])" + re.escape(ident) + r"(?![\w/])"
    return re.search(pattern, text_cf) is not None


def missing_identifiers(source: str, target: str) -> list[str]:
    """The identifiers of ``source`` (see :func:`identifiers`) that ``target`` lacks,
    sorted."""
    cf = target.casefold()
    return sorted(i for i in identifiers(source) if not _contains_identifier(cf, i))

"""Text tests on memory facts: word similarity, identifiers, and restatement.

Used at write time (:func:`opencode_memoryd.capture.writer.write_memories`: is a candidate a
near-duplicate of a stored memory?) and by dreams (:mod:`opencode_memoryd.dream.dreamer`: may a
memory be retired into another one?). The rule both rely on: a text may stand in for
another only when it keeps **every identifier** of it (:func:`identifiers`) and, for a
near-exact duplicate, **every content word** (:func:`content_words`): "The metrics worker
runs on Python 3.10." is 95% similar to "The webhook worker runs on Python 3.10." word
for word, and a different fact.
"""

from __future__ import annotations

import difflib
import re

from opencode_memoryd.text import ENGLISH_STOPWORDS


def similarity(a: str, b: str) -> float:
    """Text similarity in [0, 1] of two normalised facts (difflib's ratio on words)."""
    return difflib.SequenceMatcher(None, a.split(), b.split()).ratio()


_WORD = re.compile(r"\w+")


def content_words(text: str) -> frozenset[str]:
    """The words of ``text`` that carry content: case-folded runs of letters and digits,
    less English stopwords (:data:`opencode_memoryd.text.ENGLISH_STOPWORDS`). Not
    stemmed: "cache" is not "caching", "importer" is not "important"."""
    return frozenset(w for w in _WORD.findall(text.casefold()) if w not in ENGLISH_STOPWORDS)


def restates(new: str, old: str) -> bool:
    """Whether ``old`` already says all that ``new`` says: every content word
    (:func:`content_words`) and every identifier (:func:`identifiers`) of ``new`` is in
    ``old``; case, punctuation, stopwords and word order may differ. Not symmetric:
    ``old`` may say more."""
    if not content_words(new) <= content_words(old):
        return False
    return not missing_identifiers(new, old)


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
    """The identifiers of a memory text, case-folded: every code span (the text inside
    backticks, whitespace folded, as one identifier), and every other token that has a
    digit, a path or URL character (``/ \\ _ @ # + :``), an inner dot, a leading ``-``,
    ``/``, ``~`` or ``.``, a capital after its first letter, or is a lowercase word of two
    or more letters with no vowel (``npm``, ``ssh``).

    Tokens are split on whitespace and stripped of quotes, brackets and sentence
    punctuation (a trailing ``.`` or ``:`` too). Example: ``"Use `pnpm test` 9.1 for
    /api/v2."`` → ``{"pnpm test", "9.1", "/api/v2"}``: a command is kept whole, so
    ``cargo test billing`` is not found in ``cargo test:unit billing``.
    """
    out: set[str] = set()
    for span in _BACKTICKS.findall(text):
        t = " ".join(span.split()).casefold()
        if t:
            out.add(t)
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
    cf = " ".join(target.split()).casefold()
    return sorted(i for i in identifiers(source) if not _contains_identifier(cf, i))

"""Text tests on memory facts: word similarity, identifiers, restatement and support.

Used at write time (:func:`opencode_memoryd.capture.writer.write_memories`: is a candidate a
near-duplicate of a stored memory?) and by dreams (:mod:`opencode_memoryd.dream.dreamer`: may a
memory be retired into another one?). The rule both rely on: a text may stand in for
another only when it keeps **every identifier** of it (:func:`identifiers`) and, for a
near-exact duplicate, **every content word** (:func:`content_words`): "The metrics worker
runs on Python 3.10." is 95% similar to "The webhook worker runs on Python 3.10." word
for word, and a different fact.

The extraction gate (:mod:`opencode_memoryd.extract.reply`) asks a weaker question with the
same parts: does the user's message a memory cites *support* it (:func:`unsupported`)?
Every identifier and number must be there, and most of the memory's other words, compared
after stemming (:func:`stem`), since a memory restates what the user said in the third
person.
"""

from __future__ import annotations

import difflib
import re
import unicodedata

from opencode_memoryd.text import ENGLISH_STOPWORDS


def fold(text: str) -> str:
    """``text`` NFKC-normalised and case-folded (a right single quote as an apostrophe):
    how names, terms and values are compared."""
    return unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")

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


#: An ASCII token's tests of :func:`_is_identifier` as one regex each (the same answers as
#: the character-by-character tests, which any other token goes through).
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")
_ASCII_MARK = re.compile(r"[0-9/\\_@#+:]|^[-/~.]|.[A-Z]", re.DOTALL)


def _is_identifier(token: str) -> bool:
    if not token or token in _NOT_IDENT:
        return False
    if token.isascii():
        if not _ASCII_ALNUM.search(token):
            return False
        if _ASCII_MARK.search(token) or "." in token.strip("."):
            return True
        low = token.lower()
        return len(low) >= 2 and low.isalpha() and not (set(low) & _VOWELS)
    return _is_identifier_by_characters(token)


def _is_identifier_by_characters(token: str) -> bool:
    """The definition of an identifier, one character at a time (any token; the ASCII
    regexes above give the same answers faster): not in :data:`_NOT_IDENT`, holds a letter
    or digit, and holds a digit, starts with ``-/~.``, holds one of ``/\\_@#+:``, an inner
    dot or an inner capital, or is a vowel-less word of 2+ letters."""
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


# -- support: is a memory grounded in the text it cites? ---------------------------------

_VOWEL_LETTERS = frozenset("aeiou")


def _consonant(word: str, i: int) -> bool:
    """Porter's consonant: not a vowel, and ``y`` only after a vowel (or first)."""
    c = word[i]
    if c in _VOWEL_LETTERS:
        return False
    if c == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(word: str) -> int:
    """Porter's *m*: the number of vowel-consonant sequences in ``word``."""
    m, after_vowel = 0, False
    for i in range(len(word)):
        cons = _consonant(word, i)
        if cons and after_vowel:
            m += 1
        after_vowel = not cons
    return m


def _has_vowel(word: str) -> bool:
    return any(not _consonant(word, i) for i in range(len(word)))


def _cvc(word: str) -> bool:
    """Porter's *o: ends consonant-vowel-consonant, the last not ``w``, ``x`` or ``y``."""
    n = len(word)
    return (n >= 3 and _consonant(word, n - 3) and not _consonant(word, n - 2)
            and _consonant(word, n - 1) and word[-1] not in "wxy")


def _step_1b(w: str) -> str:
    """Porter's step 1b: ``-eed``, ``-ed``, ``-ing``, then the repair of what is left."""
    if w.endswith("eed"):
        return w[:-1] if _measure(w[:-3]) > 0 else w
    if w.endswith("ed") and _has_vowel(w[:-2]):
        w = w[:-2]
    elif w.endswith("ing") and _has_vowel(w[:-3]):
        w = w[:-3]
    else:
        return w
    if w.endswith(("at", "bl", "iz")):
        return w + "e"
    if len(w) >= 2 and w[-1] == w[-2] and _consonant(w, len(w) - 1) and w[-1] not in "lsz":
        return w[:-1]
    if _measure(w) == 1 and _cvc(w):
        return w + "e"
    return w


def stem(word: str) -> str:
    """The inflectional stem of a lowercase English word: steps 1a, 1b, 1c and 5a of the
    Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", Program 14(3), 1980),
    which fold plurals, ``-ed``, ``-ing`` and a final ``-e``: "uses", "using", "used" and
    "use" are all ``us``; "caching" and "cache" are ``cach``; "deploys" is ``deploi``.
    Derivational suffixes (``-ment``, ``-ation``) are kept. Words of one or two letters,
    and tokens with a digit, are returned unchanged."""
    w = word
    if len(w) <= 2 or any(c.isdigit() for c in w):
        return w
    if w.endswith("sses") or w.endswith("ies"):  # 1a
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    w = _step_1b(w)
    if w.endswith("y") and _has_vowel(w[:-1]):  # 1c
        w = w[:-1] + "i"
    if w.endswith("e") and len(w) > 1:  # 5a
        m = _measure(w[:-1])
        if m > 1 or (m == 1 and not _cvc(w[:-1])):
            w = w[:-1]
    return w


#: Stems of the words a memory is framed with, as the extraction prompt asks ("The user
#: prefers …", "The project uses …"): they say whose fact it is, not what it is, so they
#: are not counted for or against support.
FRAME_STEMS: frozenset[str] = frozenset(
    stem(w) for w in ("user", "project", "prefer", "want", "use", "repo", "repository",
                      "codebase")
)


def unsupported(claim: str, source: str, *, min_share: float) -> str | None:
    """Why ``source`` does not support ``claim``, or ``None`` when it does.

    Reasons:

    * ``"missing identifier"``: an identifier or number of ``claim`` (:func:`identifiers`:
      code spans, paths, URLs, versions, hosts, tokens with a digit …) is not in
      ``source`` (:func:`missing_identifiers`, case-folded, as a whole token);
    * ``"unsupported words"``: fewer than ``min_share`` (0-1) of the stemmed content words
      of ``claim`` (:func:`content_words`, :func:`stem`), less the framing words
      (:data:`FRAME_STEMS`), are stemmed content words of ``source``; or ``claim`` has no
      such word at all.

    Example: "The project deploys with `helm` to eu-west-1." is supported by "we deploy
    with helm to the eu-west-1 cluster"; "The deploy key is in /etc/x." is not supported by
    "ok thanks" (``/etc/x`` is missing).
    """
    if missing_identifiers(claim, source):
        return "missing identifier"
    words = {stem(w) for w in content_words(claim)} - FRAME_STEMS
    if not words:
        return "unsupported words"
    have = {stem(w) for w in content_words(source)}
    if len(words & have) < min_share * len(words):
        return "unsupported words"
    return None

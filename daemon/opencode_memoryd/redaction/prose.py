"""Passwords in prose: "the db password is …", "pw: …", "das Passwort ist …".

:func:`prose_finder` builds the finder from the word lists of the rule table
(:data:`~opencode_memoryd.redaction.rules.PROSE_KEYS` and friends): a key word, up to four
words of qualifier ("for the staging db"), a verb or sign (``is``, ``was``, ``set to``,
``:``, ``=``, ``ist``, ``est`` …) and then the value, quoted or up to the next white space
(trailing sentence punctuation left out). A key word followed directly by a value ("use
password X") counts only for a strong value. For pair keys ("credentials: admin / X",
"login admin:X") the part after the separator is the password.

Values must look like a password (:func:`~opencode_memoryd.redaction.heuristics.password_like`)
unless quoted; ordinary words ("the password is required"), placeholders, variables,
paths, URLs and e-mail addresses are left alone.

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from opencode_memoryd.redaction.heuristics import (
    PROSE_STOPWORDS,
    in_url,
    password_like,
    prose_value_ok,
)
from opencode_memoryd.redaction.scan import Finder, NoCase, ScanText

#: Opening quotes and their closers: ASCII, typographic (U+201C/D, U+2018/9, U+201E)
#: and guillemets (U+00AB/B).
_QUOTES = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019",
           "\u00ab": "\u00bb", "\u201e": "\u201c"}
_TRAILING = ".,;:)]}>\"'`\u201d\u2019\u00bb"
_LATIN_WORD_RE = re.compile(r"^[a-zà-ÿ ]+$")
_SPACED_SCRIPT_RE = re.compile(r"^[\u0370-\u04ff ]+$")  # Greek and Cyrillic words
_ASCII_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
#: Verbs that are prepositions ("cambié la contraseña a X", "пароль на X"): they state a
#: value only right after the key.
_PREPOSITIONS = frozenset({"a", "auf", "para", "на", "na", "till"})
_SIGN_RE = re.compile("^(?::=|=>|->|=|:|\uff1a)$")  # U+FF1A: the full-width colon
_USERNAME_RE = re.compile(r"^[\w.@+-]{1,64}$")
_PAIR_SEP_RE = re.compile(r"[ \t]*(?:/|:|\||,)[ \t]*")


def _alternation(words: Iterable[str]) -> str:
    return "|".join(re.escape(w).replace(r"\ ", r"[ \t]+")
                    for w in sorted(set(words), key=len, reverse=True))


def _letters_and_digits(value: str, least: int) -> bool:
    """At least ``least`` characters with a letter and a digit: ``Sommar2024``."""
    return len(value) >= least and any(c.isalpha() for c in value) \
        and any(c.isdigit() for c in value)


def _user_colon(m: re.Match[str]) -> bool:
    """``login admin:S3cret``: one qualifier word glued to a colon is the user name."""
    mid = (m.group("mid") or "").strip()
    return bool(mid) and " " not in mid and m.group("verb") == ":" \
        and m.start("verb") == m.end("mid")


def _secret_kind(key: str) -> str:
    """The kind a prose key implies: ``"api key"`` -> ``api_key``, ``"token"`` -> ``token``."""
    if "token" in key:
        return "token"
    if "secret" in key:
        return "secret"
    return "api_key"


def _verbs(verbs: Iterable[str]) -> str:
    """Verbs as an alternation; words of scripts written with spaces (Latin, Cyrillic,
    Greek) must stand alone ("is" but not "issue", "на" but not "наш")."""
    out = []
    for v in sorted(set(verbs), key=len, reverse=True):
        alt = re.escape(v).replace(r"\ ", r"[ \t]+")
        if _LATIN_WORD_RE.match(v) or _SPACED_SCRIPT_RE.match(v):
            alt = r"(?<![\w])" + alt + r"(?![\w])"
        out.append(alt)
    return "|".join(out)


def _value_at(text: str, pos: int) -> tuple[int, int, bool] | None:
    """``(start, end, quoted)`` of the value starting at ``pos``, or None.

    Quoted (also with JSON-escaped quotes, ``\\"…\\"``) or up to the next blank or
    backslash, trailing sentence punctuation left out.
    """
    n = len(text)
    if pos >= n:
        return None
    escaped = text[pos] == "\\" and text[pos + 1 : pos + 2] in ('"', "'")
    close = _QUOTES.get(text[pos + 1] if escaped else text[pos])
    if close is not None:
        opening = pos + 2 if escaped else pos + 1
        end = text.find("\\" + close if escaped else close, opening, opening + 101)
        if end < 0 or "\n" in text[opening:end]:
            return None
        return opening, end, True
    end = pos
    while end < n and not text[end].isspace() and text[end] != "\\" and end - pos < 100:
        end += 1
    while end > pos and text[end - 1] in _TRAILING:
        end -= 1
    if text[pos].isascii():  # "…はDragon62$yyce&9です": the particle glued on is not the value
        while end > pos and _glued_particle(text[end - 1]):
            end -= 1
    return (pos, end, False) if end > pos else None


def _glued_particle(ch: str) -> bool:
    """Whether ``ch`` is of a script written without spaces (kana, CJK ideographs, Hangul),
    whose particles and copulas follow a value with no blank between."""
    o = ord(ch)
    return (0x3040 <= o <= 0x30FF or 0x3400 <= o <= 0x9FFF or 0xAC00 <= o <= 0xD7AF
            or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F or 0xFF66 <= o <= 0xFF9F)


def prose_finder(keys: Iterable[str], verbs: Iterable[str], pair_keys: Iterable[str],
                 weak_keys: Iterable[str], secret_keys: Iterable[str],
                 seed_words: Iterable[str], bare_keys: Iterable[str] = ()) -> Finder:
    """A finder of passwords stated in prose.

    Args:
        keys: lower-case key words ("password", "passwort", "mot de passe", …); spaces
            in them match any run of blanks.
        verbs: lower-case verbs and signs between key and value ("is", "set to", ":").
        pair_keys: keys whose value is ``user<sep>password`` ("credentials", "creds").
        weak_keys: short keys ("pw", "pass") that take a value only right after a sign
            (``pw: …``, ``pass=…``), never after a verb or qualifier.
        secret_keys: other secrets stated in prose ("the api key is …", "secret: …");
            their value needs six characters, a letter, and a digit or symbol.
        seed_words: lower-case prefixes, one of which every key starts with; the regex is
            tried only where a seed occurs (``str.find`` of the seeds is much faster than
            a regex alternation of the keys).
        bare_keys: keys of languages that state a password with no verb ("мой пароль X",
            "şifrem X"): a value right after them needs six characters with a letter and
            a digit (other keys: eight, or a symbol or inner capital).

    Returns:
        A finder yielding ``(start, end, kind)`` spans: ``password``, or for secret keys
        ``token``, ``secret`` or ``api_key``.
    """
    return _ProseFinder(keys, verbs, pair_keys, weak_keys, secret_keys, seed_words, bare_keys)


class _ProseFinder:
    """The finder :func:`prose_finder` returns (a callable ``ScanText -> spans``)."""

    def __init__(self, keys: Iterable[str], verbs: Iterable[str], pair_keys: Iterable[str],
                 weak_keys: Iterable[str], secret_keys: Iterable[str],
                 seed_words: Iterable[str], bare_keys: Iterable[str]) -> None:
        self.pair = frozenset(pair_keys)
        self.bare = frozenset(bare_keys)
        self.weak = frozenset(weak_keys)
        self.seeds = tuple(seed_words)
        self.secret = frozenset(" ".join(k.split()) for k in secret_keys)
        body = (
            rf"(?P<key>{_alternation([*keys, *self.pair, *self.secret])})(?![a-z0-9-])"
            # Qualifier words are taken whole (possessive): a verb never starts inside
            # one, and a key without a verb costs a few steps, not a backtracking search.
            # (a backslash ends them: "\n" in JSON text is a line break)
            r"(?:(?P<mid>(?:[ \t]+[^\s:=\"'`()\[\]{}<>\\]{1,30}+){0,4}?)[ \t]*"
            rf"(?P<verb>{_verbs(verbs)})|(?P<sp>[ \t]+))[ \t]*"
        )
        self.pattern = re.compile(body)  # matched at candidate key starts of ``low``
        self.fallback = NoCase(r"(?<![a-z0-9])" + body)  # when ``low`` is not aligned
        # The same with the longest qualifier first: "lösenordet till databasen är X",
        # where the first verb ("till") is followed by no password.
        self.longest = re.compile(body.replace("){0,4}?)", "){0,4})"))

    def matches(self, src: ScanText) -> Iterator[re.Match[str]]:
        """Key, qualifier and verb, wherever a key starts (after a non-alphanumeric)."""
        if not src.aligned:
            yield from self.fallback.finditer(src)
            return
        low = src.low
        for q in sorted(set(src.positions(self.seeds))):
            if q > 0 and low[q - 1] in _ASCII_ALNUM:
                continue  # inside a word: "bypass", "mytoken"
            m = self.pattern.match(low, q)
            if m is not None:
                yield m  # overlapping statements are fine: their spans merge

    def _pair_value(self, text: str, found: tuple[int, int, bool]) -> tuple[int, int, bool] | None:
        """The password of ``user<sep>password`` (``admin:…``, ``admin / …``)."""
        start, end, quoted = found
        value = text[start:end]
        if ":" in value and not quoted:
            return start + value.index(":") + 1, end, quoted
        if not _USERNAME_RE.match(value):
            return None
        sep = _PAIR_SEP_RE.match(text, end)
        return _value_at(text, sep.end()) if sep else None

    def _kind(self, key: str, value: str, *, quoted: bool, sign: bool,
              spaced: bool) -> str | None:
        """The kind of a stated value, or None when it is no secret."""
        # After "=" or ":" a quoted word is code (``LABEL = "send_message"``): the
        # assignment rule judges those; after "is" it is a stated password.
        if not prose_value_ok(value, quoted=quoted and not sign):
            return None
        if spaced and not (password_like(value, strong=True)
                           or _letters_and_digits(value, 6 if key in self.bare else 8)):
            return None
        if (key in self.weak or len(key) <= 3) and not any(c.isalpha() for c in value):
            return None  # "pass: 118 tests", "mdp: 0.95"
        if key not in self.secret:
            return "password"
        if len(value) < 6 or not any(c.isalpha() for c in value) or not password_like(value):
            return None  # "token: 4096", "secret: my-secret"
        return _secret_kind(key)

    def __call__(self, src: ScanText) -> Iterator[tuple[int, int, str]]:
        for m in self.matches(src):
            found = self._statement(src, m)
            if found is None and m.group("mid") is not None and src.aligned \
                    and not self._about(src.low, m.end()):
                longest = self.longest.match(src.low, m.start())
                if longest is not None and longest.end() != m.end():
                    found = self._statement(src, longest)
            if found is not None:
                yield found

    @staticmethod
    def _about(low: str, pos: int) -> bool:
        """Whether the word at ``pos`` is one that speaks about the password ("is in …",
        "is required"): then no later verb states one either."""
        word = low[pos : pos + 30].split(maxsplit=1)
        return not word or word[0].strip(".,;:!?") in PROSE_STOPWORDS

    def _statement(self, src: ScanText, m: re.Match[str]) -> tuple[int, int, str] | None:
        """The password one match of key, qualifier and verb states, or None."""
        text = src.text
        key = " ".join(src.low[m.start("key") : m.end("key")].split())
        spaced = m.start("sp") >= 0
        sign = spaced or bool(_SIGN_RE.match(m.group("verb")))
        if key in self.weak and (not sign or spaced or m.group("mid")
                                 or m.start("verb") != m.end("key")):
            return None  # "pw X", "pass to …", "pass :meth:`x`", a Python "pass" comment
        if not spaced and m.group("mid") and m.group("verb") in _PREPOSITIONS:
            return None  # "token bug in …", "password for the db a …": not "password a X"
        if sign and in_url(text, m.start()):
            return None  # https://user:password@host is the URL rule's
        found = _value_at(text, m.end())
        if found is not None and key in self.pair and not _user_colon(m):
            found = self._pair_value(text, found)
        if found is None:
            return None
        start, end, quoted = found
        kind = self._kind(key, text[start:end], quoted=quoted, sign=sign, spaced=spaced)
        return None if kind is None else (start, end, kind)

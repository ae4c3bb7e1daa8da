"""Secrets known in one session: a value redacted once is redacted wherever it appears.

A rule recognises a secret by what surrounds it (``password=…``, ``Authorization: …``,
"my token is …"); the same value pasted again bare (a tool output, the assistant's reply, a
later turn) has nothing around it. :class:`SessionSecrets` learns each value the rules
replace in a session's text and then finds it bare in any text of that session.

Values are held as keyed digests (BLAKE2b with a per-installation key, 16 bytes) with their
length and kind, never as they are, so the state file can keep them across runs
(the daemon reads a session in increments). A text is searched by hashing only its
substrings that have the length of a known value and start and end at a word edge: a
boundary between a letter, digit, ``_`` or ``-`` and anything else, or the text's ends.
Cost: words shorter than the shortest known value are skipped by the regex engine; a
word of token characters only costs one set look-up, others (edges) x (distinct known
lengths); one hash per candidate whose both ends are edges; nothing at all while the
session knows no value. About 11 MB/s of transcript text with 50 known values of 35
lengths, 16 MB/s with one (the rules themselves run at about 3 MB/s).

Only values without white space and at least :data:`MIN_CHARS` long are learned, and an
all-letter value only from :data:`MIN_WORD_CHARS` (so that "the password is summer" does
not hide every "summer" of the session).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from opencode_memoryd.redaction.engine import Redacted, merge_counts, placeholder, scrub_found
from opencode_memoryd.redaction.scan import PLACEHOLDER_RE

__all__ = ["DIGEST_BYTES", "MIN_CHARS", "MIN_WORD_CHARS", "Known", "SessionSecrets"]

#: Bytes of each keyed digest.
DIGEST_BYTES = 16
#: Shortest value learned, in characters.
MIN_CHARS = 6
#: Shortest value made of letters only that is learned.
MIN_WORD_CHARS = 10
#: Longest value learned (a PEM block or a long JWT is recognised by its rules anyway).
MAX_CHARS = 2000

_OTHER_RE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class Known:
    """One learned secret: its keyed ``digest``, ``length`` in characters and ``kind``
    (a :data:`~opencode_memoryd.redaction.engine.KINDS` name)."""

    digest: bytes
    length: int
    kind: str


def learnable(value: str) -> bool:
    """Whether a replaced value is learned (see the module's rules)."""
    if not MIN_CHARS <= len(value) <= MAX_CHARS or any(c.isspace() for c in value):
        return False
    if PLACEHOLDER_RE.search(value):
        return False
    return len(value) >= MIN_WORD_CHARS or not value.isalpha()


class SessionSecrets:
    """The secrets recognised so far in one session, as keyed digests.

    Not thread-safe: one per session being processed (or per history answer).

    Args:
        key: the digest key (16 to 64 bytes; the state file keeps one per installation).
        known: what earlier runs learned (:meth:`new` of those runs).

    Raises:
        ValueError: the key is shorter than 16 or longer than 64 bytes.
    """

    def __init__(self, key: bytes, known: Iterable[Known] = ()) -> None:
        if not 16 <= len(key) <= 64:
            raise ValueError(f"digest key of {len(key)} bytes, 16 to 64 expected")
        self._key = key
        self._known: dict[bytes, Known] = {}
        self._lengths: set[int] = set()
        self._new: list[Known] = []
        for k in known:
            self._add(k)

    def __len__(self) -> int:
        return len(self._known)

    def digest(self, value: str) -> bytes:
        """The keyed digest of ``value`` (:data:`DIGEST_BYTES` bytes)."""
        return hashlib.blake2b(value.encode("utf-8", "surrogatepass"), key=self._key,
                               digest_size=DIGEST_BYTES).digest()

    def _add(self, k: Known) -> bool:
        if k.digest in self._known:
            return False
        self._known[k.digest] = k
        self._lengths.add(k.length)
        return True

    def learn(self, values: Iterable[tuple[str, str]]) -> int:
        """Learn ``(value, kind)`` pairs (from
        :func:`~opencode_memoryd.redaction.engine.scrub_found`); return how many are new.
        Values that are not :func:`learnable` are skipped."""
        added = 0
        for value, kind in values:
            if learnable(value):
                k = Known(self.digest(value), len(value), kind)
                if self._add(k):
                    self._new.append(k)
                    added += 1
        return added

    def new(self) -> list[Known]:
        """What was learned since the last call (to keep in the state file); clears it."""
        out, self._new = self._new, []
        return out

    def scrub(self, text: str) -> Redacted:
        """Scrub ``text`` (:func:`~opencode_memoryd.redaction.engine.scrub`), learn what it
        replaced, then replace every known value found bare (:meth:`redact_known`).

        Text scrubbed before a later value was learned can be passed to
        :meth:`redact_known` again: that is how a secret given with its key word in a later
        turn is redacted in the earlier ones.
        """
        result, values = scrub_found(text)
        self.learn(values)
        again = self.redact_known(result.text)
        if not again.counts:
            return result
        return Redacted(again.text, merge_counts(result.counts, again.counts))

    def redact_known(self, text: str) -> Redacted:
        """``text`` with every known value that stands as a word (or between word
        edges inside one, such as ``user:VALUE@host``) replaced by its placeholder;
        counts per kind."""
        if not self._known or not text:
            return Redacted(text, {})
        spans = sorted(self._find(text))
        if not spans:
            return Redacted(text, {})
        out: list[str] = []
        counts: dict[str, int] = {}
        pos = 0
        for start, end, kind in spans:
            if start < pos:  # overlaps the previous one (the longer one came first)
                continue
            out += [text[pos:start], placeholder(kind)]
            counts[kind] = counts.get(kind, 0) + 1
            pos = end
        out.append(text[pos:])
        return Redacted("".join(out), merge_counts(counts))

    def _find(self, text: str) -> Iterator[tuple[int, int, str]]:
        lengths = sorted(self._lengths)
        known = self._known
        for m in _words_of(lengths[0]).finditer(text):
            start, end = m.span()
            if _OTHER_RE.search(text, start, end) is None:  # one run: the word itself
                if end - start in self._lengths:
                    k = known.get(self.digest(text[start:end]))
                    if k is not None:
                        yield start, end, k.kind
                continue
            edges = _edges(text, start, end)
            for a in sorted(edges):
                for n in lengths:
                    if a + n > end:
                        break
                    if a + n in edges:
                        k = known.get(self.digest(text[a:a + n]))
                        if k is not None:
                            yield a, a + n, k.kind


@functools.lru_cache(maxsize=64)
def _words_of(shortest: int) -> re.Pattern[str]:
    """Runs of ``shortest`` or more characters other than white space."""
    return re.compile(rf"\S{{{shortest},}}")


def _edges(text: str, start: int, end: int) -> set[int]:
    """Positions in ``[start, end]`` where a run of token characters (``A-Za-z0-9_-``)
    starts or ends, and around every other character: the word's ends, and both sides of
    each character that is not a token character."""
    edges = {start, end}
    for m in _OTHER_RE.finditer(text, start, end):
        edges.add(m.start())
        edges.add(m.end())
    return edges

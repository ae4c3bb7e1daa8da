"""Bare high-entropy values: secrets with no key word, by shape and surroundings alone.

A model's answer or a tool's output often holds a key with nothing naming it ("Done, set
it to 8fK2…", ``openssl rand -hex 32`` output). :func:`find_bare` reports such runs:

* **mixed-case runs** (``A-Za-z0-9+/=_-``, 20+ characters, upper and lower case and a
  digit) that look random (:func:`~opencode_memoryd.redaction.heuristics.high_entropy`)
  and are not made of words (identifiers such as ``handleOAuth2CallbackV3``);
* **hex runs** (and other single-case runs) of 32+ characters, unless the words up to
  160 characters before them or after them on their line say they are a hash or an id
  (``commit``, ``sha256``, ``checksum``, ``digest``, ``docker``, ``request_id`` …), or
  they sit in a list of hashes, a ``a1b2..c3d4`` range or a ``<hash>  path`` line: a commit
  SHA and a 40-character hex key have the same shape, only the words around tell.

Never reported: UUIDs, runs inside URLs and file paths, data-URI and other base64 files
(by their magic prefix), integrity strings (``sha512-…``), ``h1:``/``sha256:`` digests, SSH
public keys, certificate and public-key PEM blocks, object ids of known APIs
(``msg_…``, ``call_…``, ``chatcmpl-…``), and values named by an id or hash key.

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

from opencode_memoryd.redaction.heuristics import (
    encodes_prose,
    high_entropy,
    ident_start,
    is_placeholder,
    looks_like_identifier,
    looks_like_path,
    names_secret,
    segments,
    word_coverage,
)
from opencode_memoryd.redaction.plugins import is_potential_uuid
from opencode_memoryd.redaction.scan import ScanText

#: A run of token characters, "=" only as trailing padding ("KEY=value" is two runs).
_RUN_RE = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,3}(?![A-Za-z0-9+/=_-])")
#: Hex in one case, possibly in dash-joined groups of 8+ (Mailgun's <32>-<8>-<8> keys;
#: UUIDs, with groups of 4, are not).
_HEX_RE = re.compile(r"^(?:[0-9a-f]+|[0-9A-F]+|[0-9a-f]{8,}(?:-[0-9a-f]{8,})+)$")
#: What ends the "word" around a run (a URL or a path is one word): blanks, quotes,
#: brackets, "|", "," and ";", all mapped to a blank.
_STOPS_TO_BLANK = str.maketrans(dict.fromkeys("\t\r\n\v\f\"'`<>()[]{}|,;", " "))

#: Words that say a hex run near them is a hash or an identifier, not a key. Those of
#: :data:`_HEX_SUFFIX_WORDS` also count at the end of a longer word (``narHash``,
#: ``commitSha``, ``sha256sum``).
_HEX_SUFFIX_WORDS = (
    "commit", "commits", "committed", "sha", "sha1", "sha224", "sha256", "sha384", "sha512",
    "md5", "hash", "hashes", "hashed", "digest", "digests", "checksum", "checksums",
    "sum", "sums", "integrity", "etag", "revision", "revisions", "fingerprint", "snapshot",
    "snapshots", "thumbprint", "signature", "objectid", "uuid", "guid",
)
_HEX_WORDS = (
    "oid", "rev", "revs", "ref", "refs", "tree", "parent", "parents", "blob", "object", "merge",
    "merged", "git", "checkout", "revert", "reverts", "reverted", "rebase", "cherry",
    "picked", "reset", "pushed", "push", "pull", "fetch", "bisect", "tag", "branch",
    "detached", "landed", "fix", "fixed", "fixes", "introduced", "build", "builds", "id",
    "ids", "trace", "span", "request", "container", "containers", "image", "images",
    "layer", "layers", "docker", "podman", "volume", "lfs", "cache", "lock", "lockfile",
    "resolved", "cid", "ipfs", "txid", "tx", "transaction", "block", "version", "release",
    "artifact", "wheel", "download", "gist", "alg", "algorithm", "reference", "gpg", "pgp",
    "fpr", "keyring", "keyserver", "recv", "submodule", "sid", "sids",
)
_HEX_SUFFIXES = tuple(_HEX_SUFFIX_WORDS)
_HEX_WORD_SET = frozenset(_HEX_WORDS) | frozenset(_HEX_SUFFIX_WORDS)
_LOWER_WORD_RE = re.compile(r"[a-z0-9]+")
#: Words that say a base64 run next to them is a digest.
_B64_CONTEXT = frozenset({
    "sha", "sha1", "sha224", "sha256", "sha384", "sha512", "md5", "hash", "digest", "checksum",
    "integrity", "fingerprint", "etag", "h1", "sri",
})
#: Names whose value is an identifier, a digest or public (``"id": "…"``, ``commit_sha=…``,
#: ``pubkey=…``).
_ID_NAMES = frozenset({
    "id", "ids", "uuid", "guid", "sha", "hash", "digest", "checksum", "etag", "integrity", "commit",
    "rev", "ref", "oid", "cid", "revision", "fingerprint", "nonce", "trace", "span", "signature",
    "challenge", "snapshot", "serial", "pubkey", "public", "publickey", "pub", "cert",
    "certificate", "thumbprint",
})
#: Base64 files by their first characters: PNG, JPEG, GIF, WebP/RIFF, PDF, zip, gzip,
#: WOFF2, SVG, XML, ICO.
_FILE_MAGIC = ("iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR", "JVBERi0", "UEsDB", "H4sI",
               "d09GMgAB", "d09GRgAB", "PHN2Zy", "PD94bWwg", "AAABAA")
#: SSH public key blobs (``ssh-rsa``, ``ssh-ed25519``, ``ecdsa-…``, ``ssh-dss``).
_SSH_BLOB = ("AAAAB3NzaC1", "AAAAC3NzaC1", "AAAAE2VjZHNh", "AAAAB3NzaC1kc3", "AAAAGnNr")
#: Object ids of APIs and tools (``msg_…``, ``call_…``, ``chatcmpl-…``, ``cus_…``),
#: publishable keys (``pk_live_…``), Twilio SIDs (two capitals and 32 hex digits: ``AC…``
#: accounts, ``SM…`` messages, ``CA…`` calls) and lone JWT parts (``eyJ…``, a real JWT is
#: its own rule).
_ID_PREFIX_RE = re.compile(
    r"^(?:ses|msg|prt|per|que|call|toolu|tool|chatcmpl|req|resp|run|thread|asst|batch|file|"
    r"evt|cus|pi|pm|ch|in|ii|sub|si|prod|price|acct|txn|ord|usr|user|org|proj|task|job|"
    r"cs|seti|src|tok|ba|po|re|tr|py|inv|cn|dp|ic|la|plan|sess|span|trace|step|vs|ft|"
    r"msgbatch|compl|cmpl|gen)[_-][A-Za-z0-9]|^pk_(?:live|test)_|^eyJ|^[A-Z]{2}[0-9a-f]{32}$"
)
_INTEGRITY_PREFIXES = ("sha1-", "sha224-", "sha256-", "sha384-", "sha512-", "md5-",
                       "blake2b-", "blake3-")
#: Prefixes of runs that are never bare secrets.
_SKIP_PREFIXES = _FILE_MAGIC + _SSH_BLOB + _INTEGRITY_PREFIXES
_DIGIT_RE = re.compile(r"[0-9]")
_DIGEST_BEFORE_RE = re.compile(r"(?:sha\d{1,3}|md5|h1|zh|blake2b|blake3)[:=]$", re.IGNORECASE)
_PEM_PUBLIC_RE = re.compile(r"-----BEGIN (?![A-Z ]*PRIVATE)[A-Z0-9 ]{3,40}-----")
_PEM_END_RE = re.compile(r"-----END [A-Z0-9 ]{3,40}-----")
_RANGE_AFTER_RE = re.compile(r"\.\.\.?[0-9a-fA-F]{7,}")
_RANGE_BEFORE_RE = re.compile(r"[0-9a-fA-F]{7,}\.\.\.?$")
#: Hashes quoted everywhere: of the empty string (SHA-256, SHA-1, MD5) and git's empty tree.
_WELL_KNOWN_HASHES = frozenset({
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "da39a3ee5e6b4b0d3255bfef95601890afd80709", "d41d8cd98f00b204e9800998ecf8427e",
    "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
})
_NAME_SEP_RE = re.compile(r"[_-]")
_NAME_PART_RE = re.compile(r"^[A-Za-z]{2,}[0-9]*[A-Za-z]?$")
_FILE_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_WORDS_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_HEX_WORD_RE = re.compile(
    r"^[\"'`(\[]?(?=[0-9]*[a-fA-F])(?:[0-9a-f]{7,}|[0-9A-F]{7,})[\"'`,;)\]:]*$"
)


def _public_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of certificate and public-key PEM blocks (their bodies are public)."""
    if "-----BEGIN" not in text:
        return []
    spans = []
    for m in _PEM_PUBLIC_RE.finditer(text):
        end = _PEM_END_RE.search(text, m.end())
        spans.append((m.start(), end.end() if end else len(text)))
    return spans


def _word_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The "word" around ``text[start:end]``: stretched to white space, quotes or brackets."""
    lo = max(0, start - 300)
    lo += text[lo:start].translate(_STOPS_TO_BLANK).rfind(" ") + 1
    tail = text[end:end + 300].translate(_STOPS_TO_BLANK)
    cut = tail.find(" ")
    return lo, end + (len(tail) if cut < 0 else cut)


def _line_words(text: str, start: int, end: int, before: int = 100, after: int = 40) -> set[str]:
    """Lower-case words on the same line, at most ``before``/``after`` characters around."""
    lo = max(text.rfind("\n", max(0, start - before), start) + 1, start - before, 0)
    hi = text.find("\n", end, end + after)
    hi = min(end + after, len(text)) if hi < 0 else hi
    return {w.lower() for w in _WORDS_RE.findall(text[lo:start] + " " + text[end:hi])}


def _hash_context(text: str, start: int, end: int) -> bool:
    """Whether the line around a hex run says it is a hash or an id (see :data:`_HEX_CONTEXT`).

    The words are looked for up to 160 characters before (across lines) and 40 after (on
    the same line). Also true next to another hex run of 7+ characters (a list of hashes) and in the
    ``From <sha> Mon Sep 17 00:00:00 2001`` line of a patch.
    """
    hi = text.find("\n", end, end + 40)
    hi = min(end + 40, len(text)) if hi < 0 else hi
    for word in _LOWER_WORD_RE.findall((text[max(0, start - 160):start] + " "
                                        + text[end:hi]).lower()):
        if word in _HEX_WORD_SET or word.endswith(_HEX_SUFFIXES):
            return True
    if "HEAD" in text[max(0, start - 160):start]:
        return True  # git's HEAD (upper case; "head -c" is not git)
    if text.startswith(" Mon Sep 17 00:00:00 2001", end):
        return True  # a patch header
    if _RANGE_AFTER_RE.match(text, end) or _RANGE_BEFORE_RE.search(text, max(0, start - 50),
                                                                   start):
        return True  # a range a1b2c3d..e4f5a6b
    after = text[end:end + 80].split()[:1]
    if after and ("/" in after[0] or _FILE_RE.search(after[0])):
        return True  # "<sha>  path/to/file": a checksum list, git submodule status
    around = text[max(0, start - 50):start].split()[-1:] + after
    return any(_HEX_WORD_RE.match(w) for w in around)


def _named_as_id(text: str, start: int) -> bool:
    """Whether the run is the value of a name such as ``id``, ``sha`` or ``commit_hash``."""
    i = start
    while i > 0 and start - i < 4 and text[i - 1] in " \t\"'`":
        i -= 1
    if i == 0 or text[i - 1] not in ":=":
        return False
    i -= 1
    while i > 0 and start - i < 8 and text[i - 1] in " \t\"'`]":
        i -= 1
    name = text[ident_start(text, i) : i]
    return bool(name) and any(s in _ID_NAMES for s in segments(name)) and not names_secret(name)


def _in_url_or_path(text: str, lo: int, hi: int, start: int, end: int) -> bool:
    """Whether the run ``text[start:end]`` lies in a URL or a path (the word ``lo:hi``)."""
    word = text[lo:hi]
    if "://" in word or word.startswith("www.") or "\\" in word:
        return True
    if looks_like_path(word) or (len(word) > 2 and word[1] == ":" and word[2] in "\\/"):
        return True  # a path, C:\ or C:/
    # A segment of a longer word: between slashes (a relative path) or after "@".
    return (text[start - 1 : start] in ("/", "@") and start > lo) or text[end : end + 1] == "/"


def _snake_name(core: str) -> bool:
    """A name of 3+ parts joined by ``_`` or ``-``, two thirds of them words (two letters or
    more, maybe a number and a letter after) in one case or capitalised
    (``EC_POINT_get_affine_coordinates_GF2m``, ``Cryptography_HAS_EC2M``).

    The parts of a random base64url token are long and mix cases.
    """
    parts = [p for p in _NAME_SEP_RE.split(core) if p]
    if len(parts) < 3:
        return False
    named = sum(1 for p in parts if _NAME_PART_RE.match(p)
                and (p.islower() or p.isupper() or p.istitle()))
    return named >= 2 / 3 * len(parts)


def _shape(core: str) -> str | None:
    """``"hex"`` (hash-shaped), ``"mixed"`` (base62/64-shaped) or None (not a secret shape).

    Hex, and other single-case runs of 32+ characters (base32/base36 keys), have the shape
    of hashes and ids too, so the words around them decide; mixed runs need both cases.
    """
    n = len(core)
    if n < 20 or _DIGIT_RE.search(core) is None:
        return None
    upper = core.lower() != core
    lower = core.upper() != core
    hex_run = _HEX_RE.match(core) is not None
    if hex_run or (upper != lower and n >= 32 and core.isalnum()):
        if n < 32 or core.isdigit():
            return None  # short SHAs, Mongo ObjectIds, span ids; numbers
        if not hex_run and word_coverage(core) >= 0.3:
            return None  # words run together
        return "hex"
    return "mixed" if upper and lower else None


def _data_or_digest(text: str, start: int, core: str) -> bool:
    """A base64 file, SSH key blob, object id, integrity string, data URI or digest."""
    if core.startswith(_SKIP_PREFIXES) or _ID_PREFIX_RE.match(core):
        return True
    before = text[max(0, start - 8):start]
    return before.endswith(("base64,", "0x", "0X")) or bool(_DIGEST_BEFORE_RE.search(before))


def _mixed_is_public(text: str, start: int, end: int, lo: int, core: str) -> bool:
    """A mixed run that is encoded prose, a digest named as such, or an SSH public key."""
    if encodes_prose(core):
        return True  # base64 of a sentence
    if _line_words(text, start, end, before=40, after=0) & _B64_CONTEXT:
        return True
    prev = text[max(0, lo - 40):lo].split()
    return bool(prev) and prev[-1].startswith(("ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-"))


def bare_secret(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` (a run of ``A-Za-z0-9+/=_-``) is a bare secret.

    The run must not be preceded or followed by another run character. See the module
    docstring for what is and is not reported. Cheap tests come first: most runs are
    names and paths, rejected by their character classes.
    """
    core = text[start:end].rstrip("=")
    shape = _shape(core)
    if shape is None or _data_or_digest(text, start, core):
        return False
    if shape == "hex":
        if core.lower() in _WELL_KNOWN_HASHES or _named_as_id(text, start) \
                or _hash_context(text, start, end):
            return False
    elif looks_like_identifier(core) or _snake_name(core) or not high_entropy(core):
        return False  # made of words: an identifier, a class or a test name
    if is_potential_uuid(core) or is_placeholder(core):
        return False
    lo, hi = _word_bounds(text, start, end)
    while hi > end and text[hi - 1] in ".,;:!?":
        hi -= 1  # sentence punctuation after the run is not part of the word
    if _in_url_or_path(text, lo, hi, start, end):
        return False
    if text[start - 1 : start] in ("#", ".") and start > lo:
        return False  # an anchor (page.html#index-FFI_005f…), an extension
    if _named_as_id(text, start):
        return False
    return shape == "hex" or not _mixed_is_public(text, start, end, lo, core)


def find_bare(src: ScanText) -> Iterator[tuple[int, int]]:
    """Spans of bare high-entropy runs (see :func:`bare_secret`).

    Runs inside :attr:`ScanText.covered` (what the other rules found) are not looked at:
    they are redacted anyway, and most runs of a text dense in secrets are such.
    """
    text = src.text
    public = _public_blocks(text)
    starts = [a for a, _ in public]
    covered = src.covered
    covered_starts = [a for a, _ in covered]
    for m in _RUN_RE.finditer(text):
        start, end = m.span()
        if public:
            i = bisect.bisect_right(starts, start) - 1
            if i >= 0 and start < public[i][1]:
                continue  # inside a certificate or public key
        if covered:
            i = bisect.bisect_right(covered_starts, start) - 1
            if i >= 0 and end <= covered[i][1]:
                continue  # already found by a more specific rule
        if bare_secret(text, start, end):
            yield start, end

"""Bare high-entropy values: secrets with no key word, by shape and surroundings alone.

A model's answer or a tool's output often holds a key with nothing naming it ("Done, set
it to 8fK2…", ``openssl rand -hex 32`` output). :func:`find_bare` reports such runs:

* **mixed-case runs** (``A-Za-z0-9+/=_-``, 20+ characters, upper and lower case and a
  digit) that look random (:func:`~opencode_memoryd.redaction.heuristics.high_entropy`)
  and are not made of words (identifiers such as ``handleOAuth2CallbackV3``);
* **hex runs** of 32+ characters, unless their line says they are a hash or an id
  (``commit``, ``sha256``, ``checksum``, ``digest``, ``docker``, ``request_id`` …): a
  commit SHA and a 40-character hex key have the same shape, only the words around tell.

Never reported: UUIDs, runs inside URLs and file paths, data-URI and other base64 files
(by their magic prefix), integrity strings (``sha512-…``), ``h1:``/``sha256:`` digests, SSH
public keys, certificate and public-key PEM blocks, object ids of known APIs
(``msg_…``, ``call_…``, ``chatcmpl-…``), and values named by an id or hash key.

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from opencode_memoryd.redaction.heuristics import (
    encodes_prose,
    high_entropy,
    is_placeholder,
    looks_like_identifier,
    names_secret,
    segments,
    word_coverage,
)
from opencode_memoryd.redaction.plugins import is_potential_uuid
from opencode_memoryd.redaction.scan import ScanText

#: A run of token characters, "=" only as trailing padding ("KEY=value" is two runs).
_RUN_RE = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{20,}={0,3}(?![A-Za-z0-9+/=_-])")
_HEX_RE = re.compile(r"^[0-9a-f]+$|^[0-9A-F]+$")
#: Characters that end a "word" around a run (a URL or a path is one word).
_WORD_STOP = frozenset(" \t\r\n\"'`<>()[]{}|,;")

#: Words that say a hex run on the same line is a hash or an identifier, not a key.
_HEX_CONTEXT = frozenset(
    """commit commits committed sha sha1 sha224 sha256 sha384 sha512 md5 hash hashes hashed
    digest digests checksum checksums shasum sha1sum sha256sum sha512sum md5sum b2sum sum
    sums integrity etag rev revs revision revisions ref refs tree parent parents blob
    object oid merge merged git checkout revert reverts reverted rebase cherry picked reset
    pushed push pull fetch bisect tag branch detached landed fix fixed fixes introduced
    build builds fingerprint id ids uuid guid trace span request container containers image
    images layer layers docker podman volume snapshot snapshots lfs cache lock lockfile
    resolved cid ipfs txid tx transaction block version release artifact wheel download
    gist objectid signature alg algorithm reference gpg pgp fpr thumbprint keyring nar
    keyserver recv submodule""".split()
)
#: Words that say a base64 run next to them is a digest.
_B64_CONTEXT = frozenset(
    """sha sha1 sha224 sha256 sha384 sha512 md5 hash digest checksum integrity fingerprint
    etag h1 sri""".split()
)
#: Names whose value is an identifier or a digest (``"id": "…"``, ``commit_sha=…``).
_ID_NAMES = frozenset(
    """id ids uuid guid sha hash digest checksum etag integrity commit rev ref oid cid
    revision fingerprint nonce trace span signature challenge""".split()
)
#: Base64 files by their first characters: PNG, JPEG, GIF, WebP/RIFF, PDF, zip, gzip,
#: WOFF2, SVG, XML, ICO.
_FILE_MAGIC = ("iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR", "JVBERi0", "UEsDB", "H4sI",
               "d09GMgAB", "d09GRgAB", "PHN2Zy", "PD94bWwg", "AAABAA")
#: SSH public key blobs (``ssh-rsa``, ``ssh-ed25519``, ``ecdsa-…``, ``ssh-dss``).
_SSH_BLOB = ("AAAAB3NzaC1", "AAAAC3NzaC1", "AAAAE2VjZHNh", "AAAAB3NzaC1kc3", "AAAAGnNr")
#: Object ids of APIs and tools (``msg_…``, ``call_…``, ``chatcmpl-…``, ``cus_…``),
#: publishable keys (``pk_live_…``) and lone JWT parts (``eyJ…``, a real JWT is its own
#: rule).
_ID_PREFIX_RE = re.compile(
    r"^(?:ses|msg|prt|per|que|call|toolu|tool|chatcmpl|req|resp|run|thread|asst|batch|file|"
    r"evt|cus|pi|pm|ch|in|ii|sub|si|prod|price|acct|txn|ord|usr|user|org|proj|task|job|"
    r"cs|seti|src|tok|ba|po|re|tr|py|inv|cn|dp|ic|la|plan|sess|span|trace|step|vs|ft|"
    r"msgbatch|compl|cmpl|gen)[_-][A-Za-z0-9]|^pk_(?:live|test)_|^eyJ"
)
_INTEGRITY_RE = re.compile(r"^(?:sha\d{1,3}|md5|blake2b|blake3)-", re.IGNORECASE)
_DIGEST_BEFORE_RE = re.compile(r"(?:sha\d{1,3}|md5|h1|zh|blake2b|blake3)[:=]$", re.IGNORECASE)
_PEM_PUBLIC_RE = re.compile(r"-----BEGIN (?![A-Z ]*PRIVATE)[A-Z0-9 ]{3,40}-----")
_PEM_END_RE = re.compile(r"-----END [A-Z0-9 ]{3,40}-----")
_FILE_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
_WORDS_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_HEX_WORD_RE = re.compile(
    r"^[\"'`(\[]?(?=[0-9]*[a-fA-F])(?:[0-9a-f]{7,}|[0-9A-F]{7,})[\"'`,;)\]:]*$"
)
_NAME_BEFORE_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]{0,60})[\"'`]?\]?[ \t]*[:=][ \t]*[\"'`]?$")


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
    i = start
    while i > 0 and text[i - 1] not in _WORD_STOP and start - i < 300:
        i -= 1
    j = end
    n = len(text)
    while j < n and text[j] not in _WORD_STOP and j - end < 300:
        j += 1
    return i, j


def _line_words(text: str, start: int, end: int, before: int = 100, after: int = 40) -> set[str]:
    """Lower-case words on the same line, at most ``before``/``after`` characters around."""
    lo = max(text.rfind("\n", max(0, start - before), start) + 1, start - before, 0)
    hi = text.find("\n", end, end + after)
    hi = min(end + after, len(text)) if hi < 0 else hi
    return {w.lower() for w in _WORDS_RE.findall(text[lo:start] + " " + text[end:hi])}


def _hash_context(text: str, start: int, end: int) -> bool:
    """Whether the line around a hex run says it is a hash or an id (see :data:`_HEX_CONTEXT`).

    Also true next to another hex run of 7+ characters (a list of hashes) and in the
    ``From <sha> Mon Sep 17 00:00:00 2001`` line of a patch.
    """
    if _near_words(text, start, end) & _HEX_CONTEXT:
        return True
    if "HEAD" in text[max(0, start - 160):start]:
        return True  # git's HEAD (upper case; "head -c" is not git)
    if text.startswith((" Mon Sep 17 00:00:00 2001", ".."), end) or text.endswith("..", 0, start):
        return True  # a patch header, a range a1b2..c3d4
    after = text[end:end + 80].split()[:1]
    if after and ("/" in after[0] or _FILE_RE.search(after[0])):
        return True  # "<sha>  path/to/file": a checksum list, git submodule status
    around = text[max(0, start - 50):start].split()[-1:] + after
    return any(_HEX_WORD_RE.match(w) for w in around)


def _near_words(text: str, start: int, end: int) -> set[str]:
    """Lower-case words up to 160 characters before (across lines) and 40 after (same line)."""
    hi = text.find("\n", end, end + 40)
    hi = min(end + 40, len(text)) if hi < 0 else hi
    return {w.lower() for w in _WORDS_RE.findall(text[max(0, start - 160):start] + " "
                                                 + text[end:hi])}


def _named_as_id(text: str, start: int) -> bool:
    """Whether the run is the value of a name such as ``id``, ``sha`` or ``commit_hash``."""
    m = _NAME_BEFORE_RE.search(text, max(0, start - 70), start)
    if not m:
        return False
    segs = segments(m.group(1))
    return any(s in _ID_NAMES for s in segs) and not names_secret(m.group(1))


def _in_url_or_path(word: str, run_is_word: bool) -> bool:
    if "://" in word or word.startswith(("www.", "/", "~/", "./", "../")) or "\\" in word:
        return True
    if len(word) > 2 and word[1] == ":" and word[2] in "\\/":
        return True  # C:\ or C:/
    # Part of a longer word with slashes or "@" in it: a relative path, a package spec.
    return not run_is_word and ("/" in word or "@" in word)


def bare_secret(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` (a run of ``A-Za-z0-9+/=_-``) is a bare secret.

    The run must not be preceded or followed by another run character. See the module
    docstring for what is and is not reported.
    """
    run = text[start:end]
    core = run.rstrip("=")
    if len(core) < 20 or is_placeholder(run):
        return False
    digit = any(c.isdigit() for c in core)
    upper = any(c.isupper() for c in core)
    lower = any(c.islower() for c in core)
    # Hex, and other single-case runs of 32+ (base32/base36 keys): their shape is that of
    # hashes and ids too, so the words around decide.
    hex_run = bool(_HEX_RE.match(core))
    is_hex = hex_run or (upper != lower and len(core) >= 32 and core.isalnum())
    if is_hex:
        if len(core) < 32 or not digit or core.isdigit():
            return False  # short SHAs, Mongo ObjectIds, span ids; numbers
        if not hex_run and word_coverage(core) >= 0.3:
            return False  # words run together
    elif not (digit and upper and lower):
        return False  # random tokens mix cases and digits; names and base32 ids do not
    if core.startswith(_FILE_MAGIC) or core.startswith(_SSH_BLOB) or _ID_PREFIX_RE.match(core):
        return False
    if _INTEGRITY_RE.match(core) or is_potential_uuid(core):
        return False  # sha512-… integrity strings, UUIDs
    before = text[max(0, start - 8):start]
    if before.endswith(("base64,", "0x", "0X")) or _DIGEST_BEFORE_RE.search(before):
        return False  # data: URIs, hex literals, sha256:…, h1:…
    lo, hi = _word_bounds(text, start, end)
    word = text[lo:hi]
    if _in_url_or_path(word, (lo, hi) == (start, end)):
        return False
    if text[start - 1 : start] in ("#", ".") and start > lo:
        return False  # an anchor (page.html#index-FFI_005f…), an extension
    if _named_as_id(text, start):
        return False
    if is_hex:
        return not _hash_context(text, start, end)
    if looks_like_identifier(core) or not high_entropy(core):
        return False  # made of words: an identifier, a class or a test name
    if encodes_prose(core):
        return False  # base64 of a sentence
    if _line_words(text, start, end, before=40, after=0) & _B64_CONTEXT:
        return False
    prev = text[max(0, lo - 40):lo].split()
    return not (prev and prev[-1].startswith(("ssh-", "ecdsa-", "sk-ssh-", "sk-ecdsa-")))


def find_bare(src: ScanText) -> Iterator[tuple[int, int]]:
    """Spans of bare high-entropy runs (see :func:`bare_secret`)."""
    text = src.text
    public = _public_blocks(text)
    for m in _RUN_RE.finditer(text):
        start, end = m.span()
        if public and any(a <= start < b for a, b in public):
            continue
        if bare_secret(text, start, end):
            yield start, end

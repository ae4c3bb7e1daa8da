"""Finders that need more than one regex: private-key blocks and the context rules.

* whole PEM and PuTTY private-key blocks (header, body and footer);
* ``Authorization`` headers and ``Bearer`` tokens;
* assignments (``password=…``, ``"token": "…"``, ``export FOO_TOKEN=…``), reported with the
  kind the assigned name implies;
* high-entropy strings right after a key word.

Each finder takes a :class:`~opencode_memoryd.redaction.scan.ScanText` and yields spans of
the original text (see :data:`~opencode_memoryd.redaction.scan.Finder`). Internal to
:mod:`opencode_memoryd.redaction`; other code imports :mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

from opencode_memoryd.redaction.heuristics import (
    CONST_RE,
    DOTTED_RE,
    IDENT_RE,
    high_entropy,
    ident_start,
    in_url,
    is_placeholder,
    looks_like_path,
    looks_like_reference,
    mixed_case,
    names_secret,
    password_like,
    random_looking,
    random_symbols,
    segments,
    word_start,
)
from opencode_memoryd.redaction.scan import Finder, NoCase, ScanText, group_text

# --------------------------------------------------------------------------------------
# Whole PEM / PuTTY private-key blocks
# --------------------------------------------------------------------------------------

# Header and footer of PEM private keys, including OpenSSH, encrypted and PGP ("BLOCK")
# variants. detect-secrets' PrivateKeyDetector lists the same headers but reports only
# the header line; here the block runs to its footer (or to the end of the text when the
# footer is missing and a key body follows the header).
_PEM_BEGIN_RE = re.compile(r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END_RE = re.compile(r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# After the header: optional RFC 1421 headers (``Proc-Type: …``), then base64 body. The
# line breaks may be real or escaped (``\n`` inside a JSON string).
_PEM_BODY_START_RE = re.compile(
    r"(?:\s|\\[nr]|[\"'`])*(?:[A-Za-z][A-Za-z-]*:[^\n\\]*(?:\n|\\n))*(?:\s|\\[nr])*"
    r"[A-Za-z0-9+/=]{16}"
)
_PUTTY_RE = re.compile(r"PuTTY-User-Key-File-\d+:")
_PUTTY_END_RE = re.compile(r"Private-MAC:[ \t]*[0-9a-fA-F]*")


def find_private_keys(src: ScanText) -> Iterator[tuple[int, int]]:
    """Spans of whole private-key blocks (header, body and footer).

    Without a footer the block runs to the end of the text if a key body follows the
    header, else only the header is reported (a header mentioned on its own).
    """
    text = src.text
    ends = [m.end() for m in _PEM_END_RE.finditer(text)]
    for m in _PEM_BEGIN_RE.finditer(text):
        i = bisect.bisect_left(ends, m.end() + 1)
        if i < len(ends):
            yield m.start(), ends[i]
        elif _PEM_BODY_START_RE.match(text, m.end()):
            yield m.start(), len(text)  # unterminated: everything after may be key
        else:
            yield m.start(), m.end()  # a header mentioned on its own
    for m in _PUTTY_RE.finditer(text):
        e = _PUTTY_END_RE.search(text, m.end())
        yield m.start(), (e.end() if e else len(text))


# --------------------------------------------------------------------------------------
# Headers
# --------------------------------------------------------------------------------------

_BEARER_RE = NoCase(r"bearer[ \t]+(?P<v>[a-z0-9._~+/=-]+)")
_AUTH_HEADER_RE = NoCase(
    r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?P<scheme>basic|token|bot)[ \t]+"
    r"(?P<v>[a-z0-9._~+/=-]+)"
)
def find_bearer(src: ScanText) -> Iterator[tuple[int, int]]:
    """``Bearer <token>`` anywhere (headers, curl, code, logs)."""
    for m in _BEARER_RE.finditer(src):
        if word_start(src.text, m.start()) and random_looking(group_text(src, m, "v")):
            yield m.span("v")


def find_auth_header(kind: str) -> Finder:
    """``Authorization: Basic|Token|Bot <credential>``; Bearer is :func:`find_bearer`.

    Args:
        kind: ``"basic_auth"`` to find the Basic scheme, anything else for Token and Bot.
    """

    def find(src: ScanText) -> Iterator[tuple[int, int]]:
        for m in _AUTH_HEADER_RE.finditer(src):
            is_basic = group_text(src, m, "scheme").lower() == "basic"
            if (kind == "basic_auth") == is_basic and random_looking(group_text(src, m, "v")):
                yield m.span("v")

    return find


# --------------------------------------------------------------------------------------
# Assignments: password=…, "token": "…", export FOO_TOKEN=…, api_key: …
# --------------------------------------------------------------------------------------

_KEY_QUALIFIERS = frozenset(
    {
        "api", "access", "secret", "private", "client", "auth", "account", "master",
        "encryption", "encrypt", "signing", "sign", "service", "app", "application",
        "license", "subscription", "consumer", "webhook", "shared", "session", "hmac",
        "admin", "deploy", "ingest", "sdk", "project", "developer", "storage", "db",
        "database", "server", "root", "user", "personal", "write", "jwt", "cookie",
    }
)
_NAME_SUFFIXES = frozenset({"value", "val", "str", "plain", "plaintext", "raw", "b64"})
_PASSWORD_WORDS = frozenset({"password", "passwd", "pwd", "pass", "passphrase", "passcode"})

_ASSIGN_RE = NoCase(
    r"(?:pass(?:word|wd|phrase|code)?|pwd|secret|token|key)"
    r"(?:[_.-]?(?:value|val|str|plain|plaintext|raw|b64))?"
    r"(?![a-z0-9])"
    r"(?:\\?[\"'`])?\]?"  # end of a quoted or subscripted name
    r"[ \t]*(?P<op>:=|=>|=(?![>~])(?!=[\s=])|:(?![:/]))[ \t]*"  # KEY==x: the value is =x
    r"(?:"
    r"(?:[rbu]{1,2}(?=[\"']))?(?P<q>\\?[\"'`])(?P<qv>[^\"'`\\\r\n]*)(?:(?P=q)|(?=\r?\n|\\n))"
    # unquoted: up to a blank or quote; "&", "," and ";" belong to the value unless they
    # separate the next name=value pair (a query string, a connection string).
    r"|(?P<uv>(?:[,;&]+(?![a-z_][a-z0-9_.\[\]-]*=))?"
    r"[^\s\"'`,;&\\]+(?:[,;&]+(?![a-z_][a-z0-9_.\[\]-]*=|\s|$)[^\s\"'`,;&\\]+)*)"
    r"|(?P<ev>[^\s\"'`]+)"  # anything: taken only for NAME=value (environment style)
    r")"
)
_PROSE_OK_RE = re.compile(r"[ \t]*(?:$|#|//|/\*|--|[,;})\]|\"']|\\[nrt])", re.MULTILINE)


def assignment_kind(name: str) -> str | None:
    """The kind named by an assignment target, or None if it does not name a secret.

    ``DB_PASSWORD`` -> ``"password"``, ``clientSecret`` -> ``"secret"``, ``auth_token``
    -> ``"token"``, ``private_key`` -> ``"private_key"``, ``api_key`` -> ``"api_key"``;
    public and publishable names -> None.
    """
    segs = segments(name)
    if "public" in segs or "publishable" in segs:
        return None  # public keys and publishable tokens are meant to be shared
    while len(segs) > 1 and segs[-1] in _NAME_SUFFIXES:
        segs.pop()
    if not segs:
        return None
    last = segs[-1]
    # Exact words, or run-together names such as PGPASSWORD, clientsecret, authtoken
    # (but not "bypass": short words must stand alone).
    if last in _PASSWORD_WORDS or last.endswith(("password", "passwd", "passphrase")):
        return "password"
    if last.endswith("secret"):
        return "secret"
    if last.endswith("token"):
        return "token"
    if last.endswith("apikey"):
        return "api_key"
    return _key_kind(segs, name) if last == "key" else None


def _key_kind(segs: list[str], name: str) -> str | None:
    """The kind named by a target whose last segment is ``key`` (``segs``: its segments,
    name suffixes dropped): ``KEY`` alone in capitals (an env file) and ``api_key`` ->
    ``"api_key"``, ``private_key`` -> ``"private_key"``, ``secret_key`` -> ``"secret"``."""
    if len(segs) == 1:
        return "api_key" if name.isupper() else None
    prev = segs[-2]
    if prev == "private":
        return "private_key"
    if prev == "secret":
        return "secret"
    return "api_key" if prev in _KEY_QUALIFIERS else None


def assigned_value_ok(kind: str, value: str, quoted: bool, *, const: bool = False) -> bool:
    """Whether an assigned value is plausibly a literal secret (see :func:`find_assignments`).

    Passwords need 4 characters, other kinds 8 and a digit or 16 mixed-case characters.
    Placeholders, code, paths, URLs and names of other variables are rejected; a quoted
    value must hold no white space (a password may hold two blanks if it has a digit or
    symbol: ``"p@ss w0rd"``), an unquoted one must not read as a reference. Brackets
    mean code, unless the value is long and random (Django's ``SECRET_KEY``).

    With ``const`` (the target is a constant's name, ``API_TOKEN`` or ``KEY``, as in env
    files, YAML and shell), any value of 3 characters or more without a blank is a
    secret, whatever its shape (a UUID, ``hunter2``, ``1234``), unless it is a
    placeholder (``changeme``, ``<token>``, ``xxx``, ``true``), a reference (``$VAR``,
    ``${VAR}``, ``$(cmd)``, ``OTHER_NAME``), code, a path or a URL.
    """
    if const and len(value) >= 3 and not any(c.isspace() for c in value):
        return _const_value_ok(value)
    if len(value) < (4 if kind == "password" else 8) or is_placeholder(value):
        return False
    if any(c in value for c in "()[]{}") and not random_symbols(value):
        return False  # code, a regex
    if "://" in value or DOTTED_RE.match(value) or value.endswith(":"):
        return False  # a URL, attribute access, a label ("pass :paramref:`x`")
    if looks_like_path(value):
        return False  # a path
    if IDENT_RE.match(value) and (CONST_RE.match(value) or names_secret(value)):
        return False  # names another variable: API_KEY, user_password, my_token
    has_digit = any(c.isdigit() for c in value)
    if kind != "password" and not (has_digit or (len(value) >= 16 and mixed_case(value))):
        # Tokens and keys are random; "receive_message" or "__root__" are labels.
        return False
    if quoted:
        blanks = sum(c.isspace() for c in value)
        return not blanks or (kind == "password" and blanks <= 2 and password_like(value)
                              and value.strip() == value)
    return not looks_like_reference(value)


def _const_value_ok(value: str) -> bool:
    """A value assigned to a constant's name that is no placeholder, reference or code."""
    if is_placeholder(value):
        return False
    if any(c in value for c in "()[]{}") and not random_symbols(value):
        return False  # code
    if "://" in value or DOTTED_RE.match(value) or looks_like_path(value):
        return False
    return not (IDENT_RE.match(value) and (CONST_RE.match(value) or names_secret(value)))


def _env_value_end(text: str, end: int) -> int:
    """The end of an environment-style value: the next blank, quote or backslash (an
    escaped ``\\n`` inside JSON)."""
    n = len(text)
    while end < n and not text[end].isspace() and text[end] not in "\"'`\\":
        end += 1
    return end


def find_assignments(src: ScanText) -> Iterator[tuple[int, int, str]]:
    """Values assigned to secret-named targets, with the kind the name implies.

    Accepts ``=``, ``:``, ``:=`` and ``=>``, quoted or not, with the name optionally quoted
    or subscripted (JSON, YAML, TOML, INI, env files, shell, Python/JS/Go/PHP code, URL
    query strings). Rejects placeholders, references to other variables or calls, type
    annotations, numbers, and unquoted values that read as prose.
    """
    text = src.text
    for m in _ASSIGN_RE.finditer(src):
        name = text[ident_start(text, m.start()) : m.end()]
        name = re.split(r"[^A-Za-z0-9_.-]", name, maxsplit=1)[0]
        kind = assignment_kind(name)
        if kind is None or (group_text(src, m, "op") == ":" and in_url(text, m.start())):
            continue
        const = name.isupper() and CONST_RE.match(name.lstrip("-") + "_X") is not None
        if m.start("qv") >= 0:
            start, end = m.span("qv")
            if assigned_value_ok(kind, text[start:end], quoted=True, const=const):
                yield start, end, kind
            continue
        span = _unquoted_value(src, m, name, kind, const)
        if span is not None:
            yield span[0], span[1], kind


def _unquoted_value(src: ScanText, m: re.Match[str], name: str, kind: str,
                    const: bool) -> tuple[int, int] | None:
    """The span of an unquoted value assigned to secret-named ``name`` (match ``m`` of
    ``_ASSIGN_RE``), or None when it is not a literal secret: a reference, code, a bare
    word in code, or prose after ``:``. See :func:`find_assignments`."""
    text = src.text
    # NAME=value with no blanks: an environment variable, whose value is all of it.
    env = (CONST_RE.match(name.lstrip("-")) is not None and group_text(src, m, "op") == "="
           and m.end("op") - m.start("op") == 1 and text[m.start("op") - 1] not in " \t"
           and text[m.end("op") : m.end("op") + 1] not in (" ", "\t"))
    if m.start("ev") >= 0 and not env:
        return None
    g = "ev" if m.start("ev") >= 0 else "uv"
    value = group_text(src, m, g)
    start, end = m.span(g)
    # Unbalanced closers at the end belong to the surrounding code: f(password=x)
    while value and value[-1] in ")]}" and value.count(value[-1]) > value.count(
        {")": "(", "]": "[", "}": "{"}[value[-1]]
    ):
        value, end = value[:-1], end - 1
    if env:
        end = _env_value_end(text, end)  # NAME=value: all of it, "&R=9^…" included
        value = text[start:end]
    if not assigned_value_ok(kind, value, quoted=False, const=const):
        return None
    op = group_text(src, m, "op")
    if IDENT_RE.match(value):
        # A bare word is a variable in code (``token = Keyword``, ``Token: fg,``) but a
        # value in env/YAML/INI files (``DB_PASSWORD=postgres``, ``password: tiger``).
        spaced = text[m.start("op") - 1 : m.start("op")] in (" ", "\t")
        if op == "=" and spaced and not any(c.isdigit() for c in value):
            return None
        if op == ":" and text[end : end + 1] in (",", ")"):
            return None
    if op == ":" and not _PROSE_OK_RE.match(text, end) and not (
            "_" in name and CONST_RE.match(name.lstrip("-"))):
        return None  # "Password: reset it from the admin page" is prose
    return start, end


# --------------------------------------------------------------------------------------
# High-entropy strings next to a key word
# --------------------------------------------------------------------------------------

_HE_WORDS = frozenset(
    {
        "key", "keys", "secret", "secrets", "token", "tokens", "password", "passwd", "pwd",
        "credential", "credentials", "creds", "auth", "authorization", "api", "apikey",
    }
)
_HE_NOT_SECRET = frozenset(
    {
        "sha", "sha1", "sha256", "sha384", "sha512", "md5", "hash", "digest", "checksum",
        "fingerprint", "commit", "etag", "id", "ids", "public", "publishable", "integrity",
        "recv", "gpg", "pgp", "thumbprint",
    }
)
#: Prefixes of keys meant to be public: Stripe's publishable keys.
_PUBLISHABLE = ("pk_live_", "pk_test_")
_HE_RE = NoCase(
    r"(?:key|secret|token|passw(?:or)?d|pwd|cred|auth|api)"
    r"[a-z0-9_.-]{0,40}"
    r"(?:\\?[\"'`])?\]?"
    r"(?:[ \t]*(?::=|=>|=|:)[ \t]*|[ \t]+)"
    r"(?:(?:is|was)(?::[ \t]*|[ \t]+))?"  # "my api key is …"
    r"(?:[rbu]{1,2}(?=[\"']))?(?:\\?[\"'`])?"
    r"(?P<run>[a-z0-9+/_=-]{20,})"
)


def find_high_entropy(src: ScanText) -> Iterator[tuple[int, int]]:
    """Base64/hex runs of 20+ characters that follow a key word and look random."""
    text = src.text
    for m in _HE_RE.finditer(src):
        start, end = m.span("run")
        run = text[start:end]
        nxt = text[end : end + 2]
        if nxt[:1] in ("@", "(") or (nxt[:1] == "." and nxt[1:2].isalnum()):
            continue  # an e-mail address, a call, a file name
        name_start = ident_start(text, m.start())
        name = re.split(r"[^A-Za-z0-9_.-]", text[name_start:start], maxsplit=1)[0]
        segs = segments(name)
        if not any(s in _HE_WORDS for s in segs):
            continue  # "monkey", "author", "keyboard"
        if any(s in _HE_NOT_SECRET for s in segs):
            continue  # key_sha256, public_key, key_id: digests and identifiers
        if is_placeholder(run) or not high_entropy(run) or run.startswith(_PUBLISHABLE):
            continue
        yield start, end

"""Value heuristics: does a string look like a secret, a placeholder, a name or code?

Pure predicates on one value (or on one position of a text) shared by the rules: placeholder
and reference detection, identifier words, randomness and Shannon entropy.

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import base64
import binascii
import math
import re

from opencode_memoryd.redaction.plugins import (
    base64_entropy,
    hex_entropy,
    is_potential_uuid,
    is_prefixed_with_dollar_sign,
    is_sequential_string,
    is_templated_secret,
)

_SEGMENT_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

_NON_SECRET_WORDS = frozenset(
    {
        "none", "null", "nil", "true", "false", "yes", "no", "on", "off", "undefined",
        "empty", "str", "string", "bytes", "int", "integer", "bool", "boolean", "any",
        "object", "text", "number", "char", "varchar", "list", "dict", "optional",
        "required", "secretstr", "test", "testing", "foo", "bar", "baz", "example",
        "dummy", "fake", "sample", "placeholder", "changeme", "changeit", "redacted",
        "hidden", "masked", "secret", "password", "passwd", "pass", "pwd", "token",
        "apikey", "api_key", "key", "value", "default", "unset", "self", "this", "env",
        "environ", "omitted", "xxx",
    }
)
_SECRET_WORDS = frozenset(
    {
        "pass", "password", "passwd", "pwd", "passphrase", "secret", "secrets", "token",
        "tokens", "key", "keys", "apikey", "auth", "cred", "creds", "credential",
        "credentials",
    }
)
_MASK_RE = re.compile(r"^[xX*•.#_\-]+$")
#: Attribute access: ``self.token``, ``process.env.X``, ``a?.b``.
DOTTED_RE = re.compile(r"^[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)+$")
#: One identifier.
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A constant's name: ``API_KEY``, ``DB_PASSWORD``.
CONST_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_SNAKE_RE = re.compile(r"^[a-z]+(?:_[a-z]+)+$")
_NUMBER_RE = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_REDACTED_WORD_RE = re.compile(r"REDACTED|\*{4,}", re.IGNORECASE)
_CASE_CHANGE_RE = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_WORDLIKE_PART_RE = re.compile(r"^(?:[A-Za-z]+[0-9]{0,3}|[0-9]+|v[0-9]+)$")
_HEX_RE = re.compile(r"^[0-9a-fA-F]+$")
#: A shell variable or command substitution: $X, ${X…}, $(…).
_VARIABLE_RE = re.compile(r"^\$(?:[A-Za-z_][A-Za-z0-9_]*|\{.*|\(.*)$")
_PRINTF_NAME_RE = re.compile(r"%\([A-Za-z_]\w*\)[-#0 +]*\d*[sdifrx]")
#: printf-style and Windows placeholders: %s, %d, %(x)s, %VAR%.
_PERCENT_VAR_RE = re.compile(r"^%(?:[-+ 0#]*\d*[sdifrx]$|\(|[A-Za-z_][A-Za-z0-9_]*%$)")
#: A path segment made of words or with a file extension.
_PATH_WORD_RE = re.compile(
    r"^(?:\.?[a-z0-9_.@-]{3,}|\.?[A-Z][a-z]+(?:[A-Z][a-z]+)*[0-9]*|.*\.[A-Za-z][A-Za-z0-9]{0,7})$"
)
_WORD_CHUNK_RE = re.compile(r"[A-Z][a-z]{2,}|[a-z]{3,}")
_DIGITS_RE = re.compile(r"[0-9]+")
_VOWEL_RE = re.compile(r"[aeiouy]")


def is_placeholder(value: str) -> bool:
    """True for values that stand for a secret rather than being one.

    Covers templating (``<x>``, ``{x}``, ``${x}``, ``{{ x }}``, ``%(x)s``, ``%s``,
    ``%VAR%``, ``$X`` via detect-secrets' ``is_templated_secret`` /
    ``is_prefixed_with_dollar_sign``, but not ``$`` before a non-name), masks
    (``****``, ``xxxx``), truncations (``sk-...``), and words like ``your_api_key_here``.
    The empty string counts as a placeholder.
    """
    if not value or is_templated_secret(value):
        return True
    if is_prefixed_with_dollar_sign(value) and _VARIABLE_RE.match(value):
        return True  # $X, ${X}, $(cmd); "$ecr3t!x" is a password
    low = value.lower()
    if low in _NON_SECRET_WORDS or _MASK_RE.match(value):
        return True
    if "${" in value or "{{" in value or "..." in value or "…" in value:
        return True
    if "%(" in value and _PRINTF_NAME_RE.search(value):
        return True
    if low.startswith(("your", "<", "[", "{")) or _PERCENT_VAR_RE.match(value):
        return True
    if low.endswith(("_here", "-here", "here>")) or "placeholder" in low or "example" in low:
        return True
    return bool(_REDACTED_WORD_RE.search(value))


def looks_like_reference(value: str) -> bool:
    """True for code that names a secret instead of containing one.

    ``os.environ["X"]``, ``getenv(...)``, ``self.token``, ``process.env.X``, ``API_KEY``,
    ``api_key``, ``user_password``, type names, numbers (shorter than six digits, or not
    all digits), paths and URLs. ``value`` must not be empty.
    """
    if any(c in value for c in "()[]{}"):
        return True
    if "://" in value or looks_like_path(value):
        return True
    if DOTTED_RE.match(value):
        return True
    if _NUMBER_RE.match(value):
        # Numbers are settings, not secrets (``token = 5``), unless long like a PIN code.
        return len(value) < 6 or not value.isdigit()
    return bool(
        IDENT_RE.match(value)
        and (names_secret(value) or CONST_RE.match(value) or _SNAKE_RE.match(value))
    )


def looks_like_path(value: str) -> bool:
    """A file path: ``/…``, ``./…``, ``../…``, ``~/…`` or ``C:\\…`` with a segment that is a
    word, a short name or has an extension (``/usr/local/bin``, ``~/.ssh/id_rsa``).

    A base64 value may start with ``/`` too (``/K4hP0v+vEw…``); its segments are random.
    """
    if not value.startswith(("/", "./", "../", "~/")) and value[1:3] not in (":\\", ":/"):
        return False
    if value.endswith("="):
        return False  # base64 padding
    parts = [p for p in re.split(r"[/\\]", value.lstrip("./~")) if p]
    return not parts or any(_PATH_WORD_RE.match(p) for p in parts)


def in_url(text: str, pos: int) -> bool:
    """Whether ``pos`` lies in a URL: the word it is in holds ``://`` before it.

    ``https://x-access-token:ghs_…@github.com``: the password of the URL, which the URL
    rule redacts up to the ``@``, is no ``token: …`` assignment.
    """
    lo = max(0, pos - 200)
    start = max(text.rfind(c, lo, pos) for c in " \t\n\"'`<>(") + 1
    return "://" in text[max(start, lo):pos]


def segments(name: str) -> list[str]:
    """Lower-cased words of an identifier: ``dbPassword`` -> ``["db", "password"]``."""
    return [s.lower() for s in _SEGMENT_RE.findall(name)]


def names_secret(identifier: str) -> bool:
    """Whether one of the identifier's words is a secret word (``user_password``, ``apiKey``).

    Word-based, so random strings that happen to contain "key" or "pass" do not count.
    """
    return any(s in _SECRET_WORDS for s in segments(identifier))


def ident_start(text: str, pos: int) -> int:
    """Walk back from ``pos`` over identifier characters (``A-Za-z0-9_.-``), at most 80.

    Returns the index where the identifier ending at ``pos`` starts (``pos`` if none).
    """
    i = pos
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_.-") and pos - i < 80:
        i -= 1
    return i


def word_start(text: str, pos: int, extra: str = "") -> bool:
    """Whether ``pos`` starts a word (not preceded by a letter, digit, ``_`` or ``extra``)."""
    return pos == 0 or not (text[pos - 1].isalnum() or text[pos - 1] in "_" + extra)


def mixed(value: str) -> bool:
    """Has at least one digit and one letter (random tokens do; words and names don't)."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def mixed_case(value: str) -> bool:
    """Has at least one upper-case and one lower-case letter."""
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


def random_looking(value: str, min_len: int = 8) -> bool:
    """A credential-looking value: long enough, and a digit or long mixed case in it.

    Trailing ``.`` and ``,`` (sentence punctuation) are ignored. ``min_len`` is in
    characters; without a digit the value needs 16 characters and mixed case.
    """
    value = value.rstrip(".,")
    if len(value) < min_len or is_placeholder(value):
        return False
    if any(c.isdigit() for c in value):
        return True
    return len(value) >= 16 and mixed_case(value)


def _wordlike_part(part: str) -> bool:
    """A word with at most a short number (``handler``, ``v2``, ``Auth``, ``x86``), in one
    case or capitalised or camelCase of a few words; not ``hifTZioSRwHLpN``."""
    if not _WORDLIKE_PART_RE.match(part):
        return False
    return len(_CASE_CHANGE_RE.findall(part)) <= 3


def high_entropy(run: str) -> bool:
    """Whether ``run`` (a base64/hex run) looks random rather than like a name or path.

    Shannon entropy from detect-secrets' calculators, with a threshold that scales with
    the length (a 20-character string cannot reach the 4.5 bits detect-secrets uses for
    long base64 strings), plus structural checks: random tokens mix letters and digits in
    short chunks, names have long words and end in version numbers. Runs shorter than 20
    characters (after trailing ``=``) are never high-entropy.
    """
    core = run.rstrip("=")
    n = len(core)
    if n < 20 or looks_like_path(core):
        return False  # too short, or a path
    if not mixed(core) or is_potential_uuid(core) or is_sequential_string(core):
        return False
    chunks = _SEGMENT_RE.findall(core)
    if chunks and sum(map(len, chunks)) / len(chunks) >= 4.5:
        return False  # long words: ConfigVersion2024Release
    parts = [p for p in re.split(r"[_\-./+]", core) if p]
    if len(parts) >= 2 and all(_wordlike_part(p) for p in parts):
        return False  # auth_v2_handler_for_oauth, site-packages/python3
    if _HEX_RE.match(core):
        return hex_entropy(core) >= 2.8
    threshold = 0.78 * math.log2(min(n, 62))
    return base64_entropy(core) >= threshold


def word_coverage(value: str) -> float:
    """The share of ``value`` (0.0-1.0) covered by word-like chunks (``Byte``, ``handle``).

    A chunk is a capital and two or more lower-case letters, or three or more lower-case
    letters, holding a vowel. ``value`` must not be empty.
    """
    chunks = [c for c in _WORD_CHUNK_RE.findall(value) if _VOWEL_RE.search(c)]
    return sum(map(len, chunks)) / len(value)


def looks_like_identifier(value: str) -> bool:
    """Whether a mixed-case run is a name made of words (``_VarUInt64ByteSizeNoTag``).

    Half of it word-like chunks (:func:`word_coverage`) and at most two groups of digits,
    or 70 % word-like chunks, with a quarter of the chunks' letters vowels (names are
    pronounceable); from 32 characters on, 60 % and 30 %. Of random base62 strings,
    under 2 % of those of 20 characters and under 0.05 % of those of 32 or more pass for
    a name.
    """
    chunks = [c for c in _WORD_CHUNK_RE.findall(value) if _VOWEL_RE.search(c)]
    letters = "".join(chunks).lower()
    long = len(value) >= 32  # long names are wordier than long random strings can be
    vowels = sum(c in "aeiou" for c in letters)
    if not letters or vowels < (0.3 if long else 0.25) * len(letters):
        return False  # "Mumxt", "Jnywzx": unpronounceable, so random
    coverage = len(letters) / len(value)
    few_digits = len(_DIGITS_RE.findall(value)) <= 2
    return coverage >= 0.7 or (coverage >= (0.6 if long else 0.5) and few_digits)


#: Characters that make a word a password rather than prose ("-", "_", "." and "'" do not).
_PASSWORD_SYMBOLS = frozenset("!@#$%^&*+=?~|\\/:;<>")
_EMAIL_RE = re.compile(r"^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$")
_COLOR_RE = re.compile(r"^#[0-9a-fA-F]{3,8}(?:\s.*)?$")
_CALL_RE = re.compile(r"^[A-Za-z_][\w.]*\(")
#: Technical terms that follow "password is" in prose: "hashed with SHA-256", "bcrypt".
_ALGORITHM_RE = re.compile(
    r"^(?:sha|md5|bcrypt|argon2(?:id)?|scrypt|pbkdf2|aes|rsa|utf|base64|http|tls|ssl|"
    r"oauth|ldap|kerberos|ntlm)[-\d]*[a-z]?$",
    re.IGNORECASE,
)
#: Words that follow "the password is" / "password:" in prose, never a password.
PROSE_STOPWORDS = frozenset({
    "required", "incorrect", "correct", "wrong", "invalid", "valid", "missing", "empty", "blank",
    "set", "unset", "stored", "saved", "changed", "expired", "expiring", "too", "same", "different",
    "optional", "mandatory", "hashed", "encrypted", "hidden", "masked", "shown", "visible", "weak",
    "strong", "long", "short", "the", "a", "an", "not", "now", "still", "also", "only", "being",
    "been", "in", "on", "at", "for", "from", "to", "of", "with", "by", "and", "or", "but", "if",
    "when", "where", "here", "there", "this", "that", "these", "those", "it", "its", "your", "my",
    "our", "their", "his", "her", "none", "null", "nil", "undefined", "true", "false", "yes", "no",
    "ok", "okay", "fine", "reset", "sent", "generated", "rotated", "needed", "used", "unused",
    "updated", "ignored", "accepted", "rejected", "protected", "secret", "public", "private",
    "local", "global", "default", "defaults", "prompted", "asked", "typed", "entered", "known",
    "unknown",
})


def password_like(value: str, *, strong: bool = False) -> bool:
    """Whether ``value`` has what a password has and a prose word lacks.

    A digit or a symbol such as ``!@#$%&`` (a capital alone does not count: ``SecretBytes``
    is a type); with ``strong``, a digit, a letter, and a symbol or a capital after the
    first letter (six characters at least).
    """
    digit = any(c.isdigit() for c in value)
    symbol = any(c in _PASSWORD_SYMBOLS for c in value)
    if strong:
        inner_upper = any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
        return (len(value) >= 6 and digit and any(c.isalpha() for c in value)
                and (symbol or inner_upper))
    return digit or symbol


def prose_value_ok(value: str, *, quoted: bool) -> bool:
    """Whether ``value``, stated as a password in prose, is plausibly a literal password.

    4-100 characters, not a placeholder, variable, path, URL, e-mail address, call,
    algorithm name or one of :data:`PROSE_STOPWORDS`; unquoted values must also be
    :func:`password_like`. Quoted values may be a plain word (``'swordfish'``) but hold no
    line break.
    """
    if not 4 <= len(value) <= 100 or is_placeholder(value) or "\n" in value:
        return False
    low = value.lower()
    if low in PROSE_STOPWORDS or low in _NON_SECRET_WORDS or _ALGORITHM_RE.match(value):
        return False
    if "://" in value or looks_like_path(value) or value.startswith(("$", "%", "@")):
        return False
    if _EMAIL_RE.match(value) or _CALL_RE.match(value) or DOTTED_RE.match(value):
        return False
    if _COLOR_RE.match(value):
        return False  # Token: "#af5f5f" (a style sheet)
    if not quoted and any(c in value for c in "()[]{}"):
        return False  # code: password=auth[1], f(password=x)
    if "</" in value or "&#" in value or "&lt;" in value or "&gt;" in value:
        return False  # markup: "token was supplied.</p>", "Password &#x3C;xxx>"
    if value.rstrip(";,.'\"`").lower() in _NON_SECRET_WORDS:
        return False  # "secret = secret;"
    if quoted:  # a stated word, not the end of one string and the start of another
        return value[0] not in " \t,;()[]" and value[-1] not in " \t,;([" and value.count(" ") <= 3
    return password_like(value)


_B64_ALPHABET_RE = re.compile(r"^[A-Za-z0-9+/_-]+$")


def encodes_prose(run: str) -> bool:
    """Whether ``run`` is base64 (or base64url) of printable text holding two blanks.

    ``VGhpcyBpcyB0aGUgd2F5`` is "This is the way": encoded prose, not a key. Encoded
    credentials such as ``user:password`` (no blanks) and random bytes do not count.
    """
    core = run.rstrip("=")
    if len(core) < 16 or not _B64_ALPHABET_RE.match(core):
        return False
    padded = core + "=" * (-len(core) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        decoded = raw.decode("ascii")
    except (binascii.Error, ValueError):
        return False
    return decoded.isprintable() and decoded.count(" ") >= 2


def random_symbols(value: str) -> bool:
    """A long random value with symbols (32+ characters, 3+ symbols, high entropy).

    Such a value is a generated secret even when it holds brackets, as Django's
    ``SECRET_KEY`` does; ``f(a, b)`` or ``[1, 2, 3]`` are not.
    """
    if len(value) < 32 or any(c.isspace() for c in value):
        return False
    if sum(not c.isalnum() for c in value) < 3:
        return False
    counts = [value.count(c) for c in set(value)]
    n = len(value)
    return -sum(k / n * math.log2(k / n) for k in counts) >= 4.0


def tag_value_ok(value: str) -> bool:
    """The text of a ``<password>…</password>`` element: a literal, not a template."""
    return len(value) >= 4 and not is_placeholder(value) and not value.startswith("$")

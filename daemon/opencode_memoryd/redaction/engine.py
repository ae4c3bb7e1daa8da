"""Secret scrubbing for transcript text, before it is stored or sent to a model.

:func:`redact` takes any text (one transcript line, a whole message, a tool output) and
returns a :class:`Redacted`: the text with every secret it recognises replaced by a typed
placeholder such as ``[REDACTED:aws_access_key]``, and how many secrets of each kind it
replaced. The secrets themselves are never returned, logged or counted by value.

The function is pure (no I/O, no global state, safe to call from several threads) and
idempotent: ``redact(redact(x).text).text == redact(x).text``, because placeholders are
protected from every rule.

Where the rules come from
-------------------------
* Provider token shapes that ``detect-secrets`` 1.5.0 knows (AWS key ids, Azure storage,
  Cloudant, Discord, GitHub classic tokens, GitLab, IBM, Mailchimp, legacy OpenAI, PyPI,
  SendGrid, Slack, SoftLayer, Square, Stripe, Telegram, Twilio, passwords in URLs) are
  taken from its plugin classes (their ``denylist`` regexes, matched here with
  ``finditer`` so that we get positions, not only values). We never call its
  ``scan_line`` (which mutates process-wide settings) nor its network verifiers. Its JWT
  validity check and heuristic filters (UUIDs, templated values, sequential strings) and
  its Shannon-entropy calculators are reused as plain functions.
* Shapes it lacks are our own rules, with prefixes and lengths learned from the gitleaks
  rule set (``cmd/generate/config/rules/*.go``): Anthropic, Google, Hugging Face, Groq,
  LangSmith, GitHub fine-grained PATs, current OpenAI keys, npm ``npm_`` tokens, Stripe
  keys longer than the 24 characters detect-secrets expects, and whole PEM blocks.
* Context rules are ours: ``Authorization`` headers, ``curl -u``, ``.netrc``, CLI flags,
  assignments (``password=…``, ``"token": "…"``, ``export FOO_TOKEN=…``) and high-entropy
  strings right after a key word.

Left alone on purpose: git SHAs, UUIDs, paths, URLs without credentials, base64 data such
as inline images (unless a key word names it), versions, colours, identifiers, numbers,
and placeholder values (``<your-password>``, ``${API_KEY}``, ``os.environ["API_KEY"]``).
"""

from __future__ import annotations

import bisect
import math
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from detect_secrets.filters.heuristic import (
    is_potential_uuid,
    is_prefixed_with_dollar_sign,
    is_sequential_string,
    is_templated_secret,
)
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
)
from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

__all__ = [
    "KINDS",
    "Redacted",
    "RedactionCounter",
    "merge_counts",
    "placeholder",
    "redact",
]

# --------------------------------------------------------------------------------------
# Public types
# --------------------------------------------------------------------------------------

#: Every kind :func:`redact` can report, i.e. every ``X`` in ``[REDACTED:X]``.
KINDS: frozenset[str] = frozenset(
    {
        # whole blocks
        "private_key",
        # provider tokens
        "anthropic_api_key",
        "artifactory_token",
        "aws_access_key",
        "aws_secret_key",
        "azure_storage_key",
        "cloudant_credential",
        "discord_bot_token",
        "github_token",
        "gitlab_token",
        "google_api_key",
        "google_oauth_secret",
        "google_oauth_token",
        "groq_api_key",
        "huggingface_token",
        "ibm_credential",
        "langsmith_api_key",
        "mailchimp_api_key",
        "npm_token",
        "openai_api_key",
        "pypi_token",
        "sendgrid_api_key",
        "slack_token",
        "slack_webhook",
        "softlayer_credential",
        "square_oauth_secret",
        "stripe_key",
        "telegram_bot_token",
        "twilio_key",
        "jwt",
        # context
        "url_password",
        "bearer_token",
        "basic_auth",
        "password",
        "secret",
        "token",
        "api_key",
        "high_entropy",
    }
)

_PLACEHOLDER_RE = re.compile(r"\[REDACTED:[a-z0-9_]+\]")


def placeholder(kind: str) -> str:
    """Return the placeholder text for ``kind``, e.g. ``"[REDACTED:jwt]"``.

    Raises:
        ValueError: ``kind`` is not in :data:`KINDS`.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown redaction kind: {kind!r}")
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class Redacted:
    """The result of :func:`redact`.

    Attributes:
        text: the input with each secret replaced by ``[REDACTED:<kind>]``.
        counts: number of secrets replaced per kind (only kinds that occurred; each key is
            in :data:`KINDS`). Never contains the secrets themselves.
    """

    text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Number of secrets replaced, all kinds together."""
        return sum(self.counts.values())

    @property
    def changed(self) -> bool:
        """Whether anything was replaced (``text`` differs from the input)."""
        return bool(self.counts)


def merge_counts(*counts: Mapping[str, int]) -> dict[str, int]:
    """Add per-kind counts together, e.g. ``merge_counts(a.counts, b.counts)``.

    Args:
        counts: any number of ``{kind: n}`` mappings (``Redacted.counts`` or earlier
            results of this function).

    Returns:
        A new dict, keys sorted, without zero entries. The inputs are not modified.
    """
    total: dict[str, int] = {}
    for mapping in counts:
        for kind, n in mapping.items():
            total[kind] = total.get(kind, 0) + int(n)
    return {k: total[k] for k in sorted(total) if total[k]}


class RedactionCounter:
    """Thread-safe running total of redaction counts across many :func:`redact` calls.

    Example::

        counter = RedactionCounter()
        for line in lines:
            result = redact(line)
            counter.add(result)
        log.info("redacted", **counter.counts)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def add(self, item: Redacted | Mapping[str, int]) -> None:
        """Add the counts of a :class:`Redacted` (or of a plain ``{kind: n}`` mapping)."""
        counts = item.counts if isinstance(item, Redacted) else item
        with self._lock:
            self._counts = merge_counts(self._counts, counts)

    @property
    def counts(self) -> dict[str, int]:
        """A snapshot copy of the totals so far (keys sorted)."""
        with self._lock:
            return dict(self._counts)

    @property
    def total(self) -> int:
        """All secrets counted so far, all kinds together."""
        with self._lock:
            return sum(self._counts.values())

    def reset(self) -> dict[str, int]:
        """Return the totals so far and start again from zero."""
        with self._lock:
            counts, self._counts = self._counts, {}
            return counts


# --------------------------------------------------------------------------------------
# Rule machinery
# --------------------------------------------------------------------------------------

class _Src:
    """The text being scanned, with its lower-cased twin.

    Case-insensitive rules are written in lower case and run case-sensitively on ``low``,
    which is several times faster than ``re.IGNORECASE`` on the original. That needs
    ``low`` to have the same indices as ``text``; ``str.lower`` keeps lengths except for
    a few characters (``"İ".lower()`` has two), so when lengths differ the rules fall back
    to ``re.IGNORECASE`` on ``text``. Spans always index ``text``.
    """

    __slots__ = ("aligned", "low", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.low = text.lower()
        self.aligned = len(self.low) == len(text)


class _CI:
    """A case-insensitive pattern, written in lower case (see :class:`_Src`)."""

    __slots__ = ("ic", "lc")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.lc = re.compile(pattern, flags)
        self.ic = re.compile(pattern, flags | re.IGNORECASE)

    def finditer(self, src: _Src) -> Iterator[re.Match[str]]:
        if src.aligned:
            return self.lc.finditer(src.low)
        return self.ic.finditer(src.text)


def _g(src: _Src, m: re.Match[str], group: int | str) -> str:
    """A group's text taken from the original (not lower-cased) text."""
    start, end = m.span(group)
    return src.text[start:end] if start >= 0 else ""


# A finder returns (start, end) spans of secret values in the text, or
# (start, end, kind) when one rule reports several kinds (assignments).
_Finder = Callable[[_Src], Iterable[tuple[int, int] | tuple[int, int, str]]]

# Lower number wins when spans of different kinds overlap.
_P_BLOCK = 0
_P_PROVIDER = 10
_P_JWT = 15
_P_URL = 20
_P_HEADER = 25
_P_ASSIGN = 30
_P_ENTROPY = 40


@dataclass(frozen=True)
class _Rule:
    kind: str
    priority: int
    find: _Finder
    # Cheap pre-checks: the rule runs only if one of these substrings occurs in the text
    # (in its lower-cased form when ``hints_nocase``; compiled patterns are searched in
    # the original). Empty = always run.
    hints: tuple[str | re.Pattern[str], ...] = ()
    hints_nocase: bool = False

    def may_match(self, src: _Src) -> bool:
        if not self.hints:
            return True
        haystack = src.low if self.hints_nocase else src.text
        for hint in self.hints:
            if isinstance(hint, str):
                if hint in haystack:
                    return True
            elif hint.search(src.text):
                return True
        return False


_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def _regex_finder(
    pattern: re.Pattern[str] | _CI,
    *,
    group: int | str = 0,
    inner: re.Pattern[str] | None = None,
    left_boundary: bool = False,
    right_boundary: bool = False,
    extend: bool = False,
    check: Callable[[str], bool] | None = None,
    gate: tuple[str, ...] = (),
) -> _Finder:
    """Build a finder from one regex.

    group: which group is the secret (0 = whole match). inner: narrow the match to the
    first match of this regex inside it. A :class:`_CI` pattern is matched
    case-insensitively. left_boundary / right_boundary: reject matches
    touching an ASCII letter or digit on that side (so a shape inside a longer base64 or
    hex run does not count). extend: grow the end over token characters (a prefix rule
    then covers a longer real token entirely). check: the value must pass this predicate.
    gate: lower-case substrings; the regex then runs only on the lines that contain one
    (for slow regexes that never span lines).
    """

    def matches(src: _Src) -> Iterator[re.Match[str]]:
        if isinstance(pattern, _CI):
            return pattern.finditer(src)
        if not gate or not src.aligned:
            return pattern.finditer(src.text)
        return (
            m
            for start, end in _lines_containing(src.low, gate)
            for m in pattern.finditer(src.text, start, end)
        )

    def find(src: _Src) -> Iterator[tuple[int, int]]:
        text = src.text
        covered = 0  # end of the last span yielded (``extend`` can reach past the match)
        for m in matches(src):
            start, end = m.span(group)
            if start < covered or start == end:
                continue
            if inner is not None:
                im = inner.search(text, start, end)
                if im is None:
                    continue
                start, end = im.span()
            if left_boundary and start > 0 and text[start - 1] in _ALNUM:
                continue
            if extend:
                n = len(text)
                while end < n and text[end] in _TOKEN_CHARS:
                    end += 1
            if right_boundary and end < len(text) and text[end] in _ALNUM:
                continue
            value = text[start:end]
            if _MASK_RUN_RE.search(value) or (check is not None and not check(value)):
                continue
            covered = end
            yield start, end

    return find


def _lines_containing(low: str, needles: tuple[str, ...]) -> list[tuple[int, int]]:
    """Sorted, merged (start, end) spans of the lines of ``low`` containing a needle."""
    spans: list[tuple[int, int]] = []
    for needle in needles:
        i = low.find(needle)
        while i >= 0:
            start = low.rfind("\n", 0, i) + 1
            end = low.find("\n", i)
            end = len(low) if end < 0 else end
            spans.append((start, end))
            i = low.find(needle, end)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


# Eight or more of one character: a mask such as ghp_xxxxxxxx…, never a real token.
_MASK_RUN_RE = re.compile(r"(.)\1{7,}")


def _ds(plugin: type, index: int) -> re.Pattern[str]:
    """The ``index``-th regex of a detect-secrets ``RegexBasedDetector`` plugin class."""
    pattern: re.Pattern[str] = list(plugin.denylist)[index]  # type: ignore[attr-defined]
    return pattern


# --------------------------------------------------------------------------------------
# Value heuristics shared by the context rules
# --------------------------------------------------------------------------------------

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
_DOTTED_RE = re.compile(r"^[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)+$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONST_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_SNAKE_RE = re.compile(r"^[a-z]+(?:_[a-z]+)+$")
_NUMBER_RE = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_REDACTED_WORD_RE = re.compile(r"REDACTED|\*{3,}", re.IGNORECASE)
_WORDLIKE_PART_RE = re.compile(r"^(?:[A-Za-z]+[0-9]{0,3}|[0-9]+|v[0-9]+)$")


def _is_placeholder(value: str) -> bool:
    """True for values that stand for a secret rather than being one.

    Covers templating (``<x>``, ``{x}``, ``${x}``, ``{{ x }}``, ``%(x)s``, ``$X`` via
    detect-secrets' ``is_templated_secret`` / ``is_prefixed_with_dollar_sign``), masks
    (``****``, ``xxxx``), truncations (``sk-...``), and words like ``your_api_key_here``.
    """
    if not value or is_templated_secret(value) or is_prefixed_with_dollar_sign(value):
        return True
    low = value.lower()
    if low in _NON_SECRET_WORDS or _MASK_RE.match(value):
        return True
    if "${" in value or "{{" in value or "%(" in value or "..." in value or "…" in value:
        return True
    if low.startswith(("your", "<", "[", "{", "%")):
        return True
    if low.endswith(("_here", "-here", "here>")) or "placeholder" in low or "example" in low:
        return True
    return bool(_REDACTED_WORD_RE.search(value))


def _looks_like_reference(value: str) -> bool:
    """True for code that names a secret instead of containing one.

    ``os.environ["X"]``, ``getenv(...)``, ``self.token``, ``process.env.X``, ``API_KEY``,
    ``api_key``, ``user_password``, type names, numbers, paths and URLs.
    """
    if any(c in value for c in "()[]{}"):
        return True
    if "://" in value or value.startswith(("/", "./", "../", "~/")) or value[1:3] == ":\\":
        return True
    if _DOTTED_RE.match(value):
        return True
    if _NUMBER_RE.match(value):
        # Numbers are settings, not secrets (``token = 5``), unless long like a PIN code.
        return len(value) < 6 or not value.isdigit()
    return bool(
        _IDENT_RE.match(value)
        and (_names_secret(value) or _CONST_RE.match(value) or _SNAKE_RE.match(value))
    )


def _segments(name: str) -> list[str]:
    """Lower-cased words of an identifier: ``dbPassword`` -> ``["db", "password"]``."""
    return [s.lower() for s in _SEGMENT_RE.findall(name)]


def _names_secret(identifier: str) -> bool:
    """Whether one of the identifier's words is a secret word (``user_password``, ``apiKey``).

    Word-based, so random strings that happen to contain "key" or "pass" do not count.
    """
    return any(s in _SECRET_WORDS for s in _segments(identifier))


def _ident_start(text: str, pos: int) -> int:
    """Walk back from ``pos`` over identifier characters (``A-Za-z0-9_.-``)."""
    i = pos
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_.-") and pos - i < 80:
        i -= 1
    return i


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


def _find_private_keys(src: _Src) -> Iterator[tuple[int, int]]:
    """Spans of whole private-key blocks (header, body and footer)."""
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


# Own token regexes start with this: a token never starts inside another token. Besides
# avoiding matches inside longer runs, it keeps every regex linear (no retry at each of
# many repeated prefixes, e.g. "eyJeyJeyJ…").
_LB = r"(?<![A-Za-z0-9_-])"

# --------------------------------------------------------------------------------------
# JWT
# --------------------------------------------------------------------------------------

# header.payload[.signature]; the header of a JWT is base64url JSON, hence "eyJ".
_JWT_RE = re.compile(
    _LB + r"eyJ[A-Za-z0-9_-]{5,}={0,2}\.[A-Za-z0-9_-]{5,}={0,2}(?:\.[A-Za-z0-9_-]*={0,2})?"
)


def _valid_jwt(value: str) -> bool:
    """Header and payload decode to JSON (detect-secrets ``JwtTokenDetector`` check)."""
    header_payload = ".".join(value.split(".")[:2])
    return bool(JwtTokenDetector.is_formally_valid(header_payload))


# --------------------------------------------------------------------------------------
# Provider token checks
# --------------------------------------------------------------------------------------


def _mixed(value: str) -> bool:
    """Has at least one digit and one letter (random tokens do; words and names don't)."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _mixed_case(value: str) -> bool:
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


def _body_after(prefix_len: int, check: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda v: check(v[prefix_len:]) and not _is_placeholder(v[prefix_len:])


def _openai_check(value: str) -> bool:
    body = value[3:]
    for p in ("proj-", "svcacct-", "admin-", "None-"):
        if body.startswith(p):
            body = body[len(p):]
            break
    return len(body) >= 20 and _mixed(body) and _mixed_case(body) and not _is_placeholder(body)


# --------------------------------------------------------------------------------------
# Context rules: headers, CLI, URLs
# --------------------------------------------------------------------------------------


def _random_looking(value: str, min_len: int = 8) -> bool:
    """A credential-looking value: long enough, and a digit or long mixed case in it."""
    value = value.rstrip(".,")
    if len(value) < min_len or _is_placeholder(value):
        return False
    if any(c.isdigit() for c in value):
        return True
    return len(value) >= 16 and _mixed_case(value)


_BEARER_RE = _CI(r"bearer[ \t]+(?P<v>[a-z0-9._~+/=-]+)")
_AUTH_HEADER_RE = _CI(
    r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?P<scheme>basic|token|bot)[ \t]+"
    r"(?P<v>[a-z0-9._~+/=-]+)"
)
_CURL_USER_RE = re.compile(r"-(?:u|-user)[ \t]+[\"']?[^\s:\"'-][^\s:\"']*:(?P<v>[^\s\"'@]+)")
_NETRC_RE = re.compile(r"machine[ \t]+\S+(?:[ \t]+login[ \t]+\S+)?[ \t]+password[ \t]+(?P<v>\S+)")
_CLI_FLAG_RE = _CI(
    r"--(?:password|passwd|pass|token|api-key|apikey|secret|client-secret|auth-token|"
    r"access-token|private-key|secret-key)[ \t]+"
    r"(?:(?P<q>[\"'])(?P<qv>[^\"'\n]+)(?P=q)|(?P<v>[^\s\"'`-][^\s\"'`]*))"
)
_URL_EMPTY_USER_RE = re.compile(r"://:(?P<v>[^\s/@:?#\"'`]+)@")


def _word_start(text: str, pos: int, extra: str = "") -> bool:
    """Whether ``pos`` starts a word (not preceded by a letter, digit, ``_`` or ``extra``)."""
    return pos == 0 or not (text[pos - 1].isalnum() or text[pos - 1] in "_" + extra)


def _find_bearer(src: _Src) -> Iterator[tuple[int, int]]:
    """``Bearer <token>`` anywhere (headers, curl, code, logs)."""
    for m in _BEARER_RE.finditer(src):
        if _word_start(src.text, m.start()) and _random_looking(_g(src, m, "v")):
            yield m.span("v")


def _find_auth_header(kind: str) -> _Finder:
    """``Authorization: Basic|Token|Bot <credential>``; Bearer is :func:`_find_bearer`."""

    def find(src: _Src) -> Iterator[tuple[int, int]]:
        for m in _AUTH_HEADER_RE.finditer(src):
            is_basic = _g(src, m, "scheme").lower() == "basic"
            if (kind == "basic_auth") == is_basic and _random_looking(_g(src, m, "v")):
                yield m.span("v")

    return find


def _find_cli(src: _Src) -> Iterator[tuple[int, int]]:
    """``curl -u user:pass``, ``.netrc`` lines, ``--password X`` / ``--token X`` flags."""
    text = src.text
    for m in _CURL_USER_RE.finditer(text):
        v = m.group("v")
        if _word_start(text, m.start(), "-") and len(v) >= 3 and not _is_placeholder(v):
            yield m.span("v")
    for m in _NETRC_RE.finditer(text):
        if _word_start(text, m.start()) and not _is_placeholder(m.group("v")):
            yield m.span("v")
    for m in _CLI_FLAG_RE.finditer(src):
        g = "qv" if m.start("qv") >= 0 else "v"
        v = _g(src, m, g)
        if (
            _word_start(text, m.start(), "-")
            and _random_looking(v, 6)
            and not _looks_like_reference(v)
        ):
            yield m.span(g)


def _url_password_ok(value: str) -> bool:
    return not _is_placeholder(value) and "$" not in value


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

_ASSIGN_RE = _CI(
    r"(?:pass(?:word|wd|phrase|code)?|pwd|secret|token|key)"
    r"(?:[_.-]?(?:value|val|str|plain|plaintext|raw|b64))?"
    r"(?![a-z0-9])"
    r"(?:\\?[\"'`])?\]?"  # end of a quoted or subscripted name
    r"[ \t]*(?P<op>:=|=>|=(?![=>~])|:(?![:/]))[ \t]*"
    r"(?:"
    r"(?:[rbu]{1,2}(?=[\"']))?(?P<q>\\?[\"'`])(?P<qv>[^\"'`\\\r\n]*)(?P=q)"
    r"|(?P<uv>[^\s\"'`,;&\\]+)"
    r")"
)
_PROSE_OK_RE = re.compile(r"[ \t]*(?:$|#|//|/\*|--|[,;})\]|]|\\[nrt])", re.MULTILINE)


def _assignment_kind(name: str) -> str | None:
    """The kind named by an assignment target, or None if it does not name a secret."""
    segs = _segments(name)
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
    if last == "key" and len(segs) > 1:
        prev = segs[-2]
        if prev == "private":
            return "private_key"
        if prev == "secret":
            return "secret"
        if prev in _KEY_QUALIFIERS:
            return "api_key"
    return None


def _assigned_value_ok(kind: str, value: str, quoted: bool) -> bool:
    """Whether an assigned value is plausibly a literal secret (see _find_assignments)."""
    if len(value) < (4 if kind == "password" else 8) or _is_placeholder(value):
        return False
    if any(c in value for c in "()[]{}") or "://" in value or _DOTTED_RE.match(value):
        return False  # code, a regex, a URL, attribute access
    if value.startswith(("/", "./", "../", "~/")) or value[1:3] == ":\\":
        return False  # a path
    if _IDENT_RE.match(value) and (_CONST_RE.match(value) or _names_secret(value)):
        return False  # names another variable: API_KEY, user_password, my_token
    has_digit = any(c.isdigit() for c in value)
    if kind != "password" and not (has_digit or (len(value) >= 16 and _mixed_case(value))):
        # Tokens and keys are random; "receive_message" or "__root__" are labels.
        return False
    if quoted:
        return not any(c.isspace() for c in value)
    return not _looks_like_reference(value)


def _find_assignments(src: _Src) -> Iterator[tuple[int, int, str]]:
    """Values assigned to secret-named targets, with the kind the name implies.

    Accepts ``=``, ``:``, ``:=`` and ``=>``, quoted or not, with the name optionally quoted
    or subscripted (JSON, YAML, TOML, INI, env files, shell, Python/JS/Go/PHP code, URL
    query strings). Rejects placeholders, references to other variables or calls, type
    annotations, numbers, and unquoted values that read as prose.
    """
    text = src.text
    for m in _ASSIGN_RE.finditer(src):
        name = text[_ident_start(text, m.start()) : m.end()]
        name = re.split(r"[^A-Za-z0-9_.-]", name, maxsplit=1)[0]
        kind = _assignment_kind(name)
        if kind is None:
            continue
        if m.start("qv") >= 0:
            start, end = m.span("qv")
            if _assigned_value_ok(kind, text[start:end], quoted=True):
                yield start, end, kind
            continue
        value = _g(src, m, "uv")
        start, end = m.span("uv")
        # Unbalanced closers at the end belong to the surrounding code: f(password=x)
        while value and value[-1] in ")]}" and value.count(value[-1]) > value.count(
            {")": "(", "]": "[", "}": "{"}[value[-1]]
        ):
            value, end = value[:-1], end - 1
        if not _assigned_value_ok(kind, value, quoted=False):
            continue
        op = _g(src, m, "op")
        if _IDENT_RE.match(value):
            # A bare word is a variable in code (``token = Keyword``, ``Token: fg,``) but a
            # value in env/YAML/INI files (``DB_PASSWORD=postgres``, ``password: tiger``).
            spaced = text[m.start("op") - 1 : m.start("op")] in (" ", "\t")
            if op == "=" and spaced and not any(c.isdigit() for c in value):
                continue
            if op == ":" and text[end : end + 1] in (",", ")"):
                continue
        if op == ":" and not _PROSE_OK_RE.match(text, end):
            continue  # "Password: reset it from the admin page" is prose
        yield start, end, kind


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
    }
)
_HE_RE = _CI(
    r"(?:key|secret|token|passw(?:or)?d|pwd|cred|auth|api)"
    r"[a-z0-9_.-]{0,40}"
    r"(?:\\?[\"'`])?\]?"
    r"(?:[ \t]*(?::=|=>|=|:)[ \t]*|[ \t]+)"
    r"(?:(?:is|was)(?::[ \t]*|[ \t]+))?"  # "my api key is …"
    r"(?:[rbu]{1,2}(?=[\"']))?(?:\\?[\"'`])?"
    r"(?P<run>[a-z0-9+/_=-]{20,})"
)
_HEX_RE = re.compile(r"^[0-9a-fA-F]+$")
_B64_ENTROPY = Base64HighEntropyString(limit=4.5)
_HEX_ENTROPY = HexHighEntropyString(limit=3.0)


def _high_entropy(run: str) -> bool:
    """Whether ``run`` (a base64/hex run) looks random rather than like a name or path.

    Shannon entropy from detect-secrets' calculators, with a threshold that scales with
    the length (a 20-character string cannot reach the 4.5 bits detect-secrets uses for
    long base64 strings), plus structural checks: random tokens mix letters and digits in
    short chunks, names have long words and end in version numbers.
    """
    core = run.rstrip("=")
    n = len(core)
    if n < 20 or core.startswith("/"):
        return False  # too short, or a path
    if not _mixed(core) or is_potential_uuid(core) or is_sequential_string(core):
        return False
    chunks = _SEGMENT_RE.findall(core)
    if chunks and sum(map(len, chunks)) / len(chunks) >= 4.5:
        return False  # long words: ConfigVersion2024Release
    parts = [p for p in re.split(r"[_\-./+]", core) if p]
    if len(parts) >= 2 and all(_WORDLIKE_PART_RE.match(p) for p in parts):
        return False  # auth_v2_handler_for_oauth, site-packages/python3
    if _HEX_RE.match(core):
        return _HEX_ENTROPY.calculate_shannon_entropy(core) >= 2.8
    threshold = 0.78 * math.log2(min(n, 62))
    return _B64_ENTROPY.calculate_shannon_entropy(core) >= threshold


def _find_high_entropy(src: _Src) -> Iterator[tuple[int, int]]:
    """Base64/hex runs of 20+ characters that follow a key word and look random."""
    text = src.text
    for m in _HE_RE.finditer(src):
        start, end = m.span("run")
        run = text[start:end]
        nxt = text[end : end + 2]
        if nxt[:1] in ("@", "(") or (nxt[:1] == "." and nxt[1:2].isalnum()):
            continue  # an e-mail address, a call, a file name
        name_start = _ident_start(text, m.start())
        name = re.split(r"[^A-Za-z0-9_.-]", text[name_start:start], maxsplit=1)[0]
        segs = _segments(name)
        if not any(s in _HE_WORDS for s in segs):
            continue  # "monkey", "author", "keyboard"
        if any(s in _HE_NOT_SECRET for s in segs):
            continue  # key_sha256, public_key, key_id: digests and identifiers
        if _is_placeholder(run) or not _high_entropy(run):
            continue
        yield start, end


# --------------------------------------------------------------------------------------
# The rule table
# --------------------------------------------------------------------------------------

_CLOUDANT_HINTS = ("cloudant", "clou", "cl_", "cl-", "clkey", "clpw", "clpass", "clapi", "cltoken")
_IBM_IAM_HINTS = ("ibm", "iam_", "iam-", "iamapi", "iamkey", "iampass", "iampwd", "iamtoken")
_IBM_COS_HINTS = ("ibm", "cos_", "cos-", "coshmac", "cossecret", "hmac")
_SOFTLAYER_HINTS = ("softlayer", "sl_", "sl-", "slapi", "slkey", "slpass", "slpwd", "sltoken")


def _ds_rule(
    kind: str,
    plugin: type,
    index: int,
    hints: tuple[str | re.Pattern[str], ...],
    *,
    nocase: bool = False,
    priority: int = _P_PROVIDER,
    **kw: object,
) -> _Rule:
    if nocase and all(isinstance(h, str) for h in hints):
        kw.setdefault("gate", hints)
    finder = _regex_finder(_ds(plugin, index), **kw)  # type: ignore[arg-type]
    return _Rule(kind, priority, finder, hints, nocase)


def _own_rule(
    kind: str,
    pattern: str,
    hints: tuple[str | re.Pattern[str], ...],
    *,
    flags: int = 0,
    nocase: bool = False,
    priority: int = _P_PROVIDER,
    **kw: object,
) -> _Rule:
    return _Rule(
        kind,
        priority,
        _regex_finder(re.compile(pattern, flags), **kw),  # type: ignore[arg-type]
        hints,
        nocase,
    )


def _build_rules() -> tuple[_Rule, ...]:
    tok = {"left_boundary": True, "extend": True}
    rules: list[_Rule] = [
        _Rule("private_key", _P_BLOCK, _find_private_keys, ("PRIVATE KEY", "PuTTY-User-Key")),
        # --- detect-secrets plugin regexes ---------------------------------------------
        _ds_rule("aws_access_key", AWSKeyDetector, 0, ("A3T", "ABIA", "ACCA", "AKIA", "ASIA"),
                 left_boundary=True, right_boundary=True),
        _ds_rule("aws_secret_key", AWSKeyDetector, 1, ("aws",), nocase=True, group=1),
        _ds_rule("azure_storage_key", AzureStorageKeyDetector, 0, ("AccountKey=",),
                 inner=re.compile(r"(?<=AccountKey=)[A-Za-z0-9+/=]+")),
        _ds_rule("url_password", BasicAuthDetector, 0, ("://",), priority=_P_URL, group=1,
                 check=_url_password_ok),
        # The IBM/Cloudant/SoftLayer regexes are slow (an optional prefix tried at every
        # position), so they run only when their vendor prefix occurs; without the prefix
        # the same assignments are covered by our assignment and high-entropy rules.
        *(
            _ds_rule("cloudant_credential", CloudantDetector, i, _CLOUDANT_HINTS, nocase=True,
                     group=1)
            for i in (0, 1)
        ),
        *(
            _ds_rule("cloudant_credential", CloudantDetector, i, ("cloudant.com",), nocase=True,
                     group=1)
            for i in (2, 3)
        ),
        _ds_rule("discord_bot_token", DiscordBotTokenDetector, 0, ("M", "N", "O"),
                 left_boundary=True, check=_mixed),
        _ds_rule("github_token", GitHubTokenDetector, 0, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
                 **tok),
        *(
            _ds_rule("gitlab_token", GitLabTokenDetector, i, ("gl", "GR1348941"), **tok)
            for i in range(len(list(GitLabTokenDetector.denylist)))
        ),
        _ds_rule("ibm_credential", IbmCloudIamDetector, 0, _IBM_IAM_HINTS, nocase=True,
                 group=1, check=_mixed),
        _ds_rule("ibm_credential", IbmCosHmacDetector, 0, _IBM_COS_HINTS, nocase=True, group=1),
        _ds_rule("mailchimp_api_key", MailchimpDetector, 0, (re.compile(r"-us\d"),),
                 left_boundary=True, right_boundary=True),
        # .npmrc "//registry/:_authToken=…" (as detect-secrets' NpmDetector, whose leading
        # ".+" is quadratic on long lines with many "//"; the registry part is not needed).
        _own_rule("npm_token", r":_authToken=[ \t]*(?P<v>[^\s\"'`\\]+)", ("_authToken",),
                  group="v", check=lambda v: not _is_placeholder(v)),
        _ds_rule("openai_api_key", OpenAIDetector, 0, ("T3BlbkFJ",), **tok),
        _ds_rule("pypi_token", PypiTokenDetector, 0, ("pypi-",), **tok),
        _ds_rule("pypi_token", PypiTokenDetector, 1, ("pypi-",), **tok),
        _ds_rule("sendgrid_api_key", SendGridDetector, 0, ("SG.",), **tok),
        _ds_rule("slack_token", SlackDetector, 0, ("xox",), nocase=True, **tok),
        _ds_rule("slack_webhook", SlackDetector, 1, ("hooks.slack.com",), nocase=True, **tok),
        _ds_rule("softlayer_credential", SoftlayerDetector, 0, _SOFTLAYER_HINTS, nocase=True,
                 group=1),
        _ds_rule("softlayer_credential", SoftlayerDetector, 1, ("api.softlayer.com",),
                 nocase=True, group=1),
        _ds_rule("square_oauth_secret", SquareOAuthDetector, 0, ("sq0csp-",), **tok),
        _ds_rule("stripe_key", StripeDetector, 0, ("k_live_",), **tok),
        _ds_rule("telegram_bot_token", TelegramBotTokenDetector, 0, (":",),
                 left_boundary=True, right_boundary=True, check=_mixed),
        _ds_rule("twilio_key", TwilioKeyDetector, 0, ("AC",), left_boundary=True,
                 right_boundary=True, check=_mixed),
        _ds_rule("twilio_key", TwilioKeyDetector, 1, ("SK",), left_boundary=True,
                 right_boundary=True, check=_mixed),
        _ds_rule("artifactory_token", ArtifactoryDetector, 0, ("AKC",),
                 inner=re.compile(r"AKC[a-zA-Z0-9]{10,}"), check=_mixed),
        # --- our own shapes (prefixes and lengths after gitleaks' rules) ---------------
        # anthropic.go: sk-ant-api03-/admin01-/oat01-/ort01- keys.
        _own_rule("anthropic_api_key", _LB + r"sk-ant-[a-z]{2,8}\d{0,3}-[A-Za-z0-9_-]{20,}",
                  ("sk-ant-",), **tok),
        # openai.go: sk-proj-/sk-svcacct-/sk-admin- and legacy sk- keys; we do not
        # require the T3BlbkFJ marker, and check the body looks random instead.
        _own_rule("openai_api_key", _LB + r"sk-(?!ant-)[A-Za-z0-9_-]{20,}", ("sk-",),
                  left_boundary=True, check=_openai_check),
        # gcp.go: AIza + 35.
        _own_rule("google_api_key", _LB + r"AIza[0-9A-Za-z_-]{35}", ("AIza",), **tok),
        _own_rule("google_oauth_secret", _LB + r"GOCSPX-[0-9A-Za-z_-]{20,}", ("GOCSPX-",), **tok),
        _own_rule("google_oauth_token", _LB + r"ya29\.[0-9A-Za-z_-]{20,}", ("ya29.",),
                  left_boundary=True, extend=True, check=_mixed),
        # github.go: fine-grained PATs; classic prefixes also with longer bodies.
        _own_rule("github_token", _LB + r"github_pat_[A-Za-z0-9_]{22,}", ("github_pat_",), **tok),
        _own_rule("github_token", _LB + r"gh[pousr]_[A-Za-z0-9]{30,}", ("gh",),
                  check=_body_after(4, _mixed), **tok),
        # gitlab.go: glpat- is covered by detect-secrets; nothing to add.
        # slack.go: app-level tokens and any xox?- token detect-secrets misses.
        _own_rule("slack_token", _LB + r"xox[a-z]-[A-Za-z0-9-]{10,}", ("xox",),
                  check=_body_after(5, _mixed), **tok),
        _own_rule("slack_token", _LB + r"xapp-\d-[A-Za-z0-9-]{10,}", ("xapp-",), **tok),
        # stripe.go: secret and restricted keys, live and test, any length.
        _own_rule("stripe_key", _LB + r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
                  ("k_live_", "k_test_"),
                  **tok),
        # huggingface.go: hf_ + 34 letters; api_org_ + 34 letters (organisation tokens).
        _own_rule("huggingface_token", _LB + r"(?:hf|api_org)_[A-Za-z]{34}(?![A-Za-z0-9])",
                  ("hf_", "api_org_"), left_boundary=True,
                  check=lambda v: _mixed_case(v.split("_")[-1]) and not _is_placeholder(v)),
        # groq.go: gsk_ + 48 alphanumerics.
        _own_rule("groq_api_key", _LB + r"gsk_[A-Za-z0-9]{40,}", ("gsk_",),
                  check=_body_after(4, _mixed), **tok),
        # npm.go: npm_ + 36 alphanumerics (detect-secrets only knows the .npmrc form).
        _own_rule("npm_token", _LB + r"npm_[A-Za-z0-9]{36}", ("npm_",),
                  check=_body_after(4, _mixed), **tok),
        # pypi.go: any PyPI macaroon (upload and test tokens both start "pypi-AgE").
        _own_rule("pypi_token", _LB + r"pypi-AgE[A-Za-z0-9_-]{50,}", ("pypi-",), **tok),
        # langsmith.go: lsv2_pt_/lsv2_sk_ + 32 + _ + 10.
        _own_rule("langsmith_api_key", _LB + r"lsv2_(?:pt|sk)_[A-Za-z0-9]{32}_[A-Za-z0-9]{10}",
                  ("lsv2_",), **tok),
        _Rule("aws_secret_key", _P_PROVIDER, _regex_finder(
            _CI(r"aws_?secret_?(?:access_?)?key[\"'`]?\]?[ \t]*(?::=|=>|=|:)[ \t]*[\"'`]?"
                r"(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+=])"),
            group="v", check=_mixed), ("aws",), True),
        _own_rule("jwt", _JWT_RE.pattern, ("eyJ",), priority=_P_JWT, left_boundary=True,
                  check=_valid_jwt),
        # --- context --------------------------------------------------------------------
        _own_rule("url_password", _URL_EMPTY_USER_RE.pattern, ("://:",), priority=_P_URL,
                  group="v", check=_url_password_ok),
        _Rule("bearer_token", _P_HEADER, _find_bearer, ("bearer",), True),
        _Rule("bearer_token", _P_HEADER, _find_auth_header("bearer_token"),
              ("authorization",), True),
        _Rule("basic_auth", _P_HEADER, _find_auth_header("basic_auth"), ("authorization",),
              True),
        _Rule("password", _P_HEADER, _find_cli, ("-u", "--user", "--", "machine")),
    ]
    # Reports password / secret / token / api_key / private_key by the assigned name.
    rules.append(
        _Rule(
            "password",
            _P_ASSIGN,
            _find_assignments,
            ("pass", "pwd", "secret", "token", "key"),
            True,
        )
    )
    rules.append(
        _Rule(
            "high_entropy",
            _P_ENTROPY,
            _find_high_entropy,
            ("key", "secret", "token", "pass", "pwd", "cred", "auth", "api"),
            True,
        )
    )
    for rule in rules:
        assert rule.kind in KINDS, rule.kind
    return tuple(rules)


_RULES = _build_rules()


# --------------------------------------------------------------------------------------
# redact()
# --------------------------------------------------------------------------------------


def redact(text: str) -> Redacted:
    """Replace the secrets in ``text`` with ``[REDACTED:<kind>]`` placeholders.

    Args:
        text: any text; may span many lines. Escaped newlines (``\\n`` inside JSON) are
            treated as line ends by the context rules.

    Returns:
        A :class:`Redacted` with the scrubbed text and per-kind counts (one per replaced
        span; overlapping findings are merged into one span named after the most specific
        kind, e.g. a JWT inside ``Authorization: Bearer …`` counts once as ``jwt``).

    Raises:
        TypeError: ``text`` is not a ``str``.

    Guarantees: text outside the replaced spans is unchanged (names, quotes, schemes,
    users and hosts of URLs stay); existing placeholders are never redacted again, so
    the function is idempotent. Kinds: see :data:`KINDS`.
    """
    if not isinstance(text, str):
        raise TypeError(f"redact() expects str, not {type(text).__name__}")
    if not text:
        return Redacted(text, {})

    src = _Src(text)
    spans: list[tuple[int, int, int, str]] = []
    for rule in _RULES:
        if not rule.may_match(src):
            continue
        for found in rule.find(src):
            kind = found[2] if len(found) == 3 else rule.kind
            spans.append((found[0], found[1], rule.priority, kind))
    if not spans:
        return Redacted(text, {})

    # Placeholders from an earlier pass are never redacted again.
    protected = [m.span() for m in _PLACEHOLDER_RE.finditer(text)]
    if protected:
        starts = [s for s, _ in protected]

        def overlaps_placeholder(start: int, end: int) -> bool:
            i = bisect.bisect_right(starts, end - 1) - 1
            return i >= 0 and protected[i][1] > start

        spans = [s for s in spans if not overlaps_placeholder(s[0], s[1])]
        if not spans:
            return Redacted(text, {})

    spans.sort()
    out: list[str] = []
    counts: dict[str, int] = {}
    pos = 0
    i = 0
    while i < len(spans):
        start, end, best_priority, best_kind = spans[i]
        best_len = end - start
        i += 1
        while i < len(spans) and spans[i][0] < end:
            s, e, p, k = spans[i]
            if (p, -(e - s)) < (best_priority, -best_len):
                best_priority, best_kind, best_len = p, k, e - s
            end = max(end, e)
            i += 1
        out.append(text[pos:start])
        out.append(f"[REDACTED:{best_kind}]")
        counts[best_kind] = counts.get(best_kind, 0) + 1
        pos = end
    out.append(text[pos:])
    return Redacted("".join(out), {k: counts[k] for k in sorted(counts)})

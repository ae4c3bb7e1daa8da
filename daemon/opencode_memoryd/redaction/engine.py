"""Secret scrubbing for transcript text, before it is stored or sent to a model.

:func:`redact` takes any text (one transcript line, a whole message, a tool output) and
returns a :class:`Redacted`: the text with every secret it recognises replaced by a typed
placeholder such as ``[REDACTED:aws_access_key]``, and how many secrets of each kind it
replaced. The secrets themselves are never returned, logged or counted by value.

The function is pure (no global state but the rules compiled on first use, which the
catalogue caches in its private cache folder; safe to call from several threads) and
idempotent: ``redact(redact(x).text).text == redact(x).text``, because placeholders are
protected from every rule. One thing is read from the calling context: inside
:func:`redacting_also` (the daemon processing one session), :func:`redact` and
:func:`scrub` also apply that block's extra redaction, the values that session revealed as
secrets (:class:`~opencode_memoryd.redaction.known.SessionSecrets`), so every text of the
session bound for a model, the store or the log is cleared of them.

Where the rules come from
-------------------------
* Provider token shapes that ``detect-secrets`` 1.5.0 knows (AWS key ids, Azure storage,
  Cloudant, Discord, GitHub classic tokens, GitLab, IBM, Mailchimp, legacy OpenAI, PyPI,
  SendGrid, Slack, SoftLayer, Square, Stripe, Telegram, Twilio, passwords in URLs) are
  taken from its plugin classes (their ``denylist`` regexes, run with
  ``finditer`` so that we get positions, not only values). We never call its
  ``scan_line`` (which mutates process-wide settings) nor its network verifiers. Its JWT
  validity check and heuristic filters (UUIDs, templated values, sequential strings) and
  its Shannon-entropy calculators are reused as plain functions.
* The maintained catalogue of ``kingfisher-secret-scanner``
  (:mod:`~opencode_memoryd.redaction.catalog`: the betterleaks and veles rules, some 490
  provider shapes, updated with the package) finds every token shape it knows, in one pass.
* Shapes neither knows, or knows narrower, are our own rules
  (:mod:`~opencode_memoryd.redaction.tokens`), with prefixes and lengths learned from the
  gitleaks rule set (``cmd/generate/config/rules/*.go``): any ``sk-ant-`` key, Google,
  Hugging Face and Groq keys of any length, LangSmith, GitHub tokens of any length,
  OpenAI keys without their marker, Stripe keys of any length and webhook secrets,
  Mailgun, Discord webhooks, signed-URL signatures, Sentry DSNs, a dozen more vendors by
  prefix (Vault, Tailscale, Doppler, New Relic, …), and whole PEM blocks.
* Context rules are ours (:mod:`~opencode_memoryd.redaction.rules`): passwords in URLs,
  ``Authorization`` headers, command lines (``mysql -p…``, ``curl -u``, ``--password=…``
  …), ``.netrc``, assignments (``password=…``, ``export FOO_TOKEN=…``), ``<password>``
  elements, passwords stated in prose in many languages, high-entropy strings after a key
  word, and bare high-entropy strings (hex only when the words around do not say hash/id).
* A key pasted over two lines or split over string literals is found whole
  (:mod:`~opencode_memoryd.redaction.split`).

Left alone on purpose: git SHAs, UUIDs, content hashes, integrity strings, paths, URLs
without credentials, base64 data such as inline images and public keys (unless a key word
names it), versions, colours, identifiers, numbers, object ids of APIs (``msg_…``), and
placeholder values (``<your-password>``, ``${API_KEY}``, ``os.environ["API_KEY"]``).
``tests/redaction_corpus.py`` and ``tests/redaction_negatives.py`` are the corpora that
measure both (``bench/redaction_corpus.py`` prints recall per kind and false positives).

Layout
------
This module is the public surface: :func:`redact`, :func:`scrub` (invisible Unicode
stripped, then redacted: for text bound to a model or the store), :func:`scrub_found`
(and the values replaced), :func:`redacting_also`, :func:`redact_by_rules`,
:func:`extra_redaction`, :class:`Redacted`, :data:`KINDS`, :func:`placeholder`,
:func:`merge_counts` and :class:`RedactionCounter`; beside it
:mod:`~opencode_memoryd.redaction.known` (the values one session revealed). Behind it:
:mod:`~opencode_memoryd.redaction.rules` (the rule table, context rules as data),
:mod:`~opencode_memoryd.redaction.tokens` (token shapes as data),
:mod:`~opencode_memoryd.redaction.finders` (headers, assignments, entropy after a key
word, private-key blocks), :mod:`~opencode_memoryd.redaction.cli` (command lines),
:mod:`~opencode_memoryd.redaction.prose` (passwords in prose),
:mod:`~opencode_memoryd.redaction.bare` (bare high-entropy strings),
:mod:`~opencode_memoryd.redaction.split` (keys split over lines or string literals),
:mod:`~opencode_memoryd.redaction.heuristics` (is a value a secret?),
:mod:`~opencode_memoryd.redaction.scan` (rule type, regex finders, span merging),
:mod:`~opencode_memoryd.redaction.catalog` (the maintained rule catalogue),
:mod:`~opencode_memoryd.redaction.unicode` (invisible characters) and
:mod:`~opencode_memoryd.redaction.plugins` (everything taken from detect-secrets).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from opencode_memoryd.redaction.scan import apply_rules_found
from opencode_memoryd.redaction.split import find_joins, join
from opencode_memoryd.redaction.unicode import strip_invisible

if TYPE_CHECKING:
    from opencode_memoryd.redaction.scan import Rule

__all__ = [
    "KINDS",
    "Redacted",
    "RedactionCounter",
    "extra_redaction",
    "join_split_tokens",
    "merge_counts",
    "placeholder",
    "redact",
    "redact_by_rules",
    "redacting_also",
    "scrub",
    "scrub_found",
]

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
        "mailgun_api_key",
        "discord_webhook",
        "signature",
        "shopify_token",
        "digitalocean_token",
        "databricks_token",
        "linear_api_key",
        "notion_token",
        "postman_api_key",
        "vault_token",
        "age_secret_key",
        "tailscale_key",
        "grafana_token",
        "doppler_token",
        "replicate_token",
        "supabase_token",
        "newrelic_key",
        "square_token",
        "pulumi_token",
        "xai_api_key",
        "perplexity_api_key",
        "atlassian_token",
        "sentry_token",
        "heroku_token",
        "dropbox_token",
        "mapbox_token",
        "flyio_token",
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


_rules: tuple[Rule, ...] | None = None


def _load_rules() -> tuple[Rule, ...]:
    """The rule table, imported on first use: it compiles many patterns and takes
    detect-secrets' plugins, which a process that never redacts need not load."""
    global _rules
    if _rules is None:
        from opencode_memoryd.redaction.rules import RULES

        # Every rule reports a known kind (the assignment rule's others are in KINDS too).
        assert all(rule.kind in KINDS for rule in RULES), [
            r.kind for r in RULES if r.kind not in KINDS]
        _rules = tuple(RULES)
    return _rules


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
    return _also(redact_by_rules(text))


def redact_by_rules(text: str) -> Redacted:
    """As :func:`redact`, without the extra redaction of :func:`redacting_also` (the same
    answer in any context, for a cache).

    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"redact() expects str, not {type(text).__name__}")
    return _found(text)[0]


#: The extra redaction of the block the caller is in (:func:`redacting_also`).
_ALSO: ContextVar[Callable[[str], Redacted] | None] = ContextVar(
    "opencode_memoryd_redacting_also", default=None)


@contextmanager
def redacting_also(extra: Callable[[str], Redacted]) -> Iterator[None]:
    """Within the block, :func:`redact` and :func:`scrub` in this thread (and the tasks
    it starts) also pass their result through ``extra``: e.g.
    :meth:`~opencode_memoryd.redaction.known.SessionSecrets.redact_known` while one
    session is processed, so its summaries, memories, the model's answers and the log
    are cleared of the values the session revealed as secrets."""
    token = _ALSO.set(extra)
    try:
        yield
    finally:
        _ALSO.reset(token)


def extra_redaction(text: str) -> Redacted:
    """Only the extra redaction of the :func:`redacting_also` block the caller is in
    (``text`` unchanged, no counts, outside one): for a caller that caches
    :func:`redact_by_rules`."""
    return _also(Redacted(text, {}))


def _also(result: Redacted) -> Redacted:
    extra = _ALSO.get()
    if extra is None or not result.text:
        return result
    again = extra(result.text)
    if not again.counts:
        return result
    return Redacted(again.text, merge_counts(result.counts, again.counts))


def _found(text: str) -> tuple[Redacted, list[tuple[str, str]]]:
    if not text:
        return Redacted(text, {}), []
    scrubbed, counts, values = apply_rules_found(text, _rules or _load_rules())
    return Redacted(scrubbed, counts), values


def scrub(text: str) -> Redacted:
    """Clean text bound for a model or the store: strip invisible Unicode, then redact.

    Invisible characters (:func:`~opencode_memoryd.redaction.unicode.strip_invisible`: tag
    characters, zero-width characters, bidi controls) go first, so that an instruction
    spelled in tag characters never reaches a model and a secret split by a zero-width
    space is still found whole.

    Args:
        text: any text.

    Returns:
        As :func:`redact`, for the text without invisible characters.

    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    return redact(strip_invisible(text))


def scrub_found(text: str) -> tuple[Redacted, list[tuple[str, str]]]:
    """As :func:`scrub`, and the secrets it replaced, to recognise them elsewhere.

    Returns:
        ``(result, values)``: ``values`` holds ``(value, kind)`` per replaced finding, in
        text order (a key split over lines or string literals whole, without the break).
        The values are the caller's to keep in memory or hash
        (:class:`~opencode_memoryd.redaction.known.SessionSecrets`), never to log or store.

    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"scrub_found() expects str, not {type(text).__name__}")
    return _found(strip_invisible(text))


def join_split_tokens(text: str) -> str:
    """``text`` with the line breaks inside keys pasted over two lines removed.

    The breaks :func:`redact` itself looks through
    (:func:`~opencode_memoryd.redaction.split.find_joins`): a line ending in a random-looking
    run of token characters, the next starting with one, and the lines of a YAML block
    scalar holding one key; not the glue between string literals, which folding leaves
    recognisable. Call it before folding white space (a tool output shown on one line),
    so that the two halves of a key do not become two words, each too short to be
    recognised.

    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"join_split_tokens() expects str, not {type(text).__name__}")
    joins = find_joins(text, literals=False)  # folding keeps concatenations recognisable
    return join(text, joins) if joins else text

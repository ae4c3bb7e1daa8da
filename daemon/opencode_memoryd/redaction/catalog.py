"""Token shapes from a maintained rule set: the catalogue ``kingfisher-secret-scanner`` ships.

Kingfisher (MongoDB's secret scanner, Apache-2.0) bundles the betterleaks rules (the
gitleaks rule set's successor) and Google's veles rules, some 490 provider token shapes at
medium confidence, and updates them with each release: a new provider's token shape
arrives with ``pip install -U``, not with a change here. Its Rust engine (Vectorscan)
runs all of them over a text in one pass, from several threads at once.

:func:`find_catalog` is the finder of the rule table
(:data:`~opencode_memoryd.redaction.rules.RULES`); our own token rows
(:mod:`~opencode_memoryd.redaction.tokens`) cover what the catalogue misses. Only visible
findings count (Kingfisher's helper matches, such as a client id that pairs with a secret,
do not), and rules that find identifiers rather than secrets (ids, host names, URLs,
publishable and public keys: :data:`IDENTIFIER_RULE_RE`) are left out, and so are those
our context rules do more finely (:data:`CONTEXT_RULE_RE`).

The catalogue is compiled on first use, once per process (about 3 s; Kingfisher caches
the compiled form in ``KF_RULE_CACHE_DIR``, which :func:`cache_dir` points at our own
cache folder unless it is set, after which a load takes about 0.3 s). The scan makes no
network request: validation and revocation are separate Kingfisher calls we never make.
Where the package has no wheel (Intel Macs) it is not installed, and the finder finds
nothing: our own token rules and the context rules still run.

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`; the only module importing ``kingfisher_sdk``.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from opencode_memoryd.redaction.scan import ScanText

if TYPE_CHECKING:
    from kingfisher_sdk import Scanner

__all__ = ["CONFIDENCE", "CONTEXT_RULE_RE", "IDENTIFIER_RULE_RE", "SECRET_DESPITE_NAME",
           "catalog_kind", "find_catalog"]

#: The catalogue's confidence level we load: ``medium`` takes every rule of ``high`` and
#: the provider rules whose shape needs a key word nearby.
CONFIDENCE: Final[Literal["medium"]] = "medium"

#: Rule names (the id without its ``betterleaks.`` / ``veles.secrets/`` source) whose
#: findings identify rather than authenticate: client, account and tenant ids, user names,
#: host names, URLs, publishable and public keys.
IDENTIFIER_RULE_RE = re.compile(
    r"(?:-id|-ids|-url|-host|-name|-domain|-address|-username|-repository|pub-key|pub-api-key|"
    r"public-key|public-api-token|project-api-key|-endpoint)(?:\.\d+)?$"
)

#: Rules whose names read as identifiers but whose findings are secrets: a Slack webhook
#: URL carries its token, ``sb_secret_…`` is Supabase's secret key, and Alibaba access key
#: ids are redacted like AWS's.
SECRET_DESPITE_NAME: frozenset[str] = frozenset({
    "slack-webhook-url", "supabase-project-api-key", "alibaba-access-key-id",
    "alibaba-sts-access-key-id",
})

#: Rules whose findings our context rules make finer (they keep the scheme, user and host
#: of a URL and the name of a header): curl's ``-u`` and ``-H``, credentials in URLs.
CONTEXT_RULE_RE = re.compile(
    r"^(?:curl-|generic-credential-uri|mongodb-connection-string|sidekiq-sensitive-url)"
)

#: Kinds of our own table for the catalogue's rule names (first matching prefix wins);
#: every other rule reports ``token``.
_KIND_PREFIXES: tuple[tuple[str, str], ...] = (
    ("anthropic", "anthropic_api_key"),
    ("openai", "openai_api_key"),
    ("aws-access-token", "aws_access_key"),
    ("alibaba-access-key-id", "aws_access_key"),
    ("alibaba-sts-access-key-id", "aws_access_key"),
    ("aws-secret", "aws_secret_key"),
    ("github", "github_token"),
    ("gitlab", "gitlab_token"),
    ("slack-webhook", "slack_webhook"),
    ("slack", "slack_token"),
    ("stripe", "stripe_key"),
    ("gcp-api-key", "google_api_key"),
    ("private-key", "private_key"),
    ("jwt", "jwt"),
    ("huggingface", "huggingface_token"),
    ("groq", "groq_api_key"),
    ("npm", "npm_token"),
    ("pypi", "pypi_token"),
    ("sendgrid", "sendgrid_api_key"),
    ("telegram", "telegram_bot_token"),
    ("twilio", "twilio_key"),
    ("mailgun", "mailgun_api_key"),
    ("mailchimp", "mailchimp_api_key"),
    ("discord", "discord_bot_token"),
    ("shopify", "shopify_token"),
    ("digitalocean", "digitalocean_token"),
    ("databricks", "databricks_token"),
    ("linear", "linear_api_key"),
    ("notion", "notion_token"),
    ("postman", "postman_api_key"),
    ("vault", "vault_token"),
    ("age-secret", "age_secret_key"),
    ("tailscale", "tailscale_key"),
    ("grafana", "grafana_token"),
    ("doppler", "doppler_token"),
    ("replicate", "replicate_token"),
    ("supabase", "supabase_token"),
    ("new-relic", "newrelic_key"),
    ("square", "square_token"),
    ("pulumi", "pulumi_token"),
    ("xai", "xai_api_key"),
    ("grokxai", "xai_api_key"),
    ("perplexity", "perplexity_api_key"),
    ("atlassian", "atlassian_token"),
    ("sentry", "sentry_token"),
    ("heroku", "heroku_token"),
    ("dropbox", "dropbox_token"),
    ("mapbox", "mapbox_token"),
    ("flyio", "flyio_token"),
    ("azure-storage", "azure_storage_key"),
    ("langchain-langsmith", "langsmith_api_key"),
)

_lock = threading.Lock()
_scanner: Scanner | None = None
_missing = False  # the package is not installed (no wheel for the platform)


def catalog_kind(rule_id: str) -> str | None:
    """The placeholder kind for a catalogue rule id, or None for an identifier rule.

    ``"betterleaks.groq-api-key"`` -> ``"groq_api_key"``, ``"betterleaks.render-api-key"``
    -> ``"token"``; identifier rules (``"betterleaks.azure-tenant-id"``) and the rules
    :data:`CONTEXT_RULE_RE` names -> None.
    """
    name = rule_id.rsplit("/", 1)[-1] if "/" in rule_id else rule_id.split(".", 1)[-1]
    if name not in SECRET_DESPITE_NAME and (IDENTIFIER_RULE_RE.search(name)
                                            or CONTEXT_RULE_RE.match(name)):
        return None
    for prefix, kind in _KIND_PREFIXES:
        if name.startswith(prefix):
            return kind
    return "token"


def cache_dir() -> Path:
    """Where the compiled catalogue is cached: ``KF_RULE_CACHE_DIR`` when set, else
    ``$XDG_CACHE_HOME/opencode-memoryd/kingfisher`` (``~/.cache`` when
    ``XDG_CACHE_HOME`` is unset), so everything the daemon writes is under its own names."""
    if os.environ.get("KF_RULE_CACHE_DIR"):
        return Path(os.environ["KF_RULE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opencode-memoryd" / "kingfisher"


def _load() -> Scanner | None:
    """The shared scanner, its rules compiled on first use (thread-safe); None where the
    package is not installed (Intel Macs, for which it ships no wheel)."""
    global _scanner, _missing
    with _lock:
        if _scanner is None and not _missing:
            try:
                from kingfisher_sdk import Rules, Scanner
            except ImportError:
                _missing = True
                return None
            os.environ["KF_RULE_CACHE_DIR"] = str(cache_dir())  # read by Kingfisher
            # base64=False: encoded blobs are the bare rule's; redact=False: we need the
            # values to find their spans.
            _scanner = Scanner(Rules(confidence=CONFIDENCE), base64=False, redact=False)
        return _scanner


def _decoded_len(chunk: bytes) -> int:
    """Characters in a UTF-8 chunk (lone surrogates included; a cut character counts as
    replacement characters, which the finder's search around the offset absorbs)."""
    try:
        return len(chunk.decode("utf-8", "surrogatepass"))
    except UnicodeDecodeError:
        return len(chunk.decode("utf-8", "replace"))


class _CharIndex:
    """Byte offsets of a UTF-8 text to character offsets, asked in any order.

    Decodes only the bytes between the offsets asked (sorted first), so a few findings
    in a long text cost one pass over it at most.
    """

    def __init__(self, data: bytes, offsets: list[int]) -> None:
        self.chars: dict[int, int] = {}
        pos = chars = 0
        for off in sorted(set(offsets)):
            chars += _decoded_len(data[pos:off])
            self.chars[off] = chars
            pos = off


def find_catalog(src: ScanText) -> Iterator[tuple[int, int, str]]:
    """Spans of the secrets the catalogue's rules find in ``src``, with their kinds.

    Yields:
        ``(start, end, kind)`` in characters of ``src.text``; kinds per :func:`catalog_kind`.
    """
    scanner = _load()
    if scanner is None:
        return
    text = src.text
    data = text.encode("utf-8", "surrogatepass")
    findings = scanner.scan(data)
    found: list[tuple[int, int, str, str]] = []
    for f in findings:
        kind = catalog_kind(f.rule_id) if f.visible else None
        # A trailing backslash is the escape of a quote in JSON text, never the secret's
        # (the catalogue's JWT rule takes it: ``\"id_token\": \"eyJ…\"``).
        secret = f.secret.rstrip("\\")
        if kind is not None and secret:
            loc = f.location
            found.append((loc["start_offset"], loc["end_offset"], kind, secret))
    if found and len(data) != len(text):  # bytes to characters
        index = _CharIndex(data, [o for s, e, _, _ in found for o in (s, e)])
        found = [(index.chars[s], index.chars[e], k, v) for s, e, k, v in found]
    for start, end, kind, secret in found:
        at = text.find(secret, max(0, start - 1), end + 1)
        if at < 0:
            at = text.find(secret)
        if at >= 0:
            yield at, at + len(secret), kind

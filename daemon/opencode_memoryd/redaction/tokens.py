"""Token shapes as data: every rule that recognises a secret by its own shape.

Each row is a :class:`RegexRule` (kind, pattern, hints, priority, group and match
options); :func:`compile_rule` turns a row into a :class:`~opencode_memoryd.redaction.scan.Rule`.
The detect-secrets rows take their pattern from :mod:`~opencode_memoryd.redaction.plugins`;
ours are regex source here, with prefixes and lengths learned from the gitleaks rule set
(``cmd/generate/config/rules/*.go``) and the providers' documentation, for what the
maintained catalogue (:mod:`~opencode_memoryd.redaction.catalog`) misses or knows only
in a narrower shape. The context rules
(headers, command lines, assignments, prose, entropy) are in
:mod:`~opencode_memoryd.redaction.rules`, which joins both tables.

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from opencode_memoryd.redaction import plugins as ds
from opencode_memoryd.redaction.finders import find_private_keys
from opencode_memoryd.redaction.heuristics import is_placeholder, mixed, mixed_case
from opencode_memoryd.redaction.scan import (
    P_BLOCK,
    P_JWT,
    P_PROVIDER,
    P_URL,
    NoCase,
    Rule,
    regex_finder,
)


@dataclass(frozen=True)
class RegexRule:
    """One regex rule as data; :func:`compile_rule` turns it into a :class:`Rule`.

    Attributes:
        kind: the placeholder kind.
        pattern: regex source (compiled without flags), a compiled pattern (a
            detect-secrets plugin regex) or a :class:`NoCase` pattern.
        hints: substrings (or compiled patterns) one of which must occur for the rule to
            run (see :attr:`Rule.hints`).
        priority: one of the ``P_*`` values of :mod:`~opencode_memoryd.redaction.scan`.
        group: which group is the secret (0 = whole match).
        nocase: the string hints are lower case and searched in the lower-cased text; a
            compiled pattern then also runs only on the lines holding a hint.
        left: reject matches preceded by an ASCII letter or digit.
        right: reject matches followed by an ASCII letter or digit.
        extend: grow the match over trailing token characters.
        inner: narrow the match to the first match of this regex inside it.
        check: a predicate the value must pass.
    """

    kind: str
    pattern: str | re.Pattern[str] | NoCase
    hints: tuple[str | re.Pattern[str], ...]
    priority: int = P_PROVIDER
    group: int | str = 0
    nocase: bool = False
    left: bool = False
    right: bool = False
    extend: bool = False
    inner: re.Pattern[str] | None = None
    check: Callable[[str], bool] | None = None


#: "Not inside a longer token": a pattern starting with this lookbehind is compiled without
#: it, and the finder checks the character before each match instead. A pattern that
#: starts with a literal then lets ``re`` jump from one occurrence of the literal to the
#: next, several times faster. (Patterns that may fail after an unbounded run, such as the
#: JWT's, keep the lookbehind in the regex as :data:`_LB_RE`, which stays linear on
#: "eyJeyJeyJ…".)
_LB = r"(?<![A-Za-z0-9_-])"
_LB_RE = r"(?<![A-Za-z0-9_-])(?:)"
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def compile_rule(row: RegexRule) -> Rule:
    """The :class:`Rule` for one table row (its finder is a :func:`regex_finder`)."""
    left: bool | frozenset[str] = row.left
    pattern: re.Pattern[str] | NoCase
    if isinstance(row.pattern, str) and row.pattern.startswith(_LB) \
            and not row.pattern.startswith(_LB_RE):
        pattern = re.compile(row.pattern[len(_LB):])
        left = _TOKEN_CHARS
    else:
        pattern = re.compile(row.pattern) if isinstance(row.pattern, str) else row.pattern
    gate: tuple[str, ...] = ()
    if row.nocase and all(isinstance(h, str) for h in row.hints):
        gate = tuple(h for h in row.hints if isinstance(h, str))
    finder = regex_finder(
        pattern,
        group=row.group,
        inner=row.inner,
        left_boundary=left,
        right_boundary=row.right,
        extend=row.extend,
        check=row.check,
        gate=gate,
    )
    return Rule(row.kind, row.priority, finder, row.hints, hints_nocase=row.nocase)


# --------------------------------------------------------------------------------------
# Value checks of single rows
# --------------------------------------------------------------------------------------


def _body_after(prefix_len: int, check: Callable[[str], bool]) -> Callable[[str], bool]:
    """A check of the value after its first ``prefix_len`` characters (not a placeholder)."""
    return lambda v: check(v[prefix_len:]) and not is_placeholder(v[prefix_len:])


def _openai_check(value: str) -> bool:
    """An ``sk-`` key whose body (after any ``proj-``-like label) looks random.

    Mixed case, or lower-case hex of 32+ characters (DeepSeek and other OpenAI-compatible
    providers).
    """
    body = value[3:]
    for p in ("proj-", "svcacct-", "admin-", "None-"):
        if body.startswith(p):
            body = body[len(p):]
            break
    if len(body) < 20 or not mixed(body) or is_placeholder(body):
        return False
    return mixed_case(body) or (len(body) >= 32 and _LOWER_HEX_RE.match(body) is not None)


def url_password_ok(value: str) -> bool:
    """A URL password that is a literal (not ``$VAR``, ``${VAR}``, ``$(cmd)`` or a placeholder)."""
    return not is_placeholder(value) and "${" not in value and "$(" not in value


def _not_placeholder(value: str) -> bool:
    return not is_placeholder(value)


def _huggingface_check(value: str) -> bool:
    body = value.split("_")[-1]
    return (mixed_case(body) or mixed(body)) and not is_placeholder(value)


_LOWER_HEX_RE = re.compile(r"^[0-9a-f]+$")


# --------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------

# Our token regexes start with _LB: a token never starts inside another token.

_CLOUDANT_HINTS = ("cloudant", "clou", "cl_", "cl-", "clkey", "clpw", "clpass", "clapi", "cltoken")
_IBM_IAM_HINTS = ("ibm", "iam_", "iam-", "iamapi", "iamkey", "iampass", "iampwd", "iamtoken")
_IBM_COS_HINTS = ("ibm", "cos_", "cos-", "coshmac", "cossecret", "hmac")
_SOFTLAYER_HINTS = ("softlayer", "sl_", "sl-", "slapi", "slkey", "slpass", "slpwd", "sltoken")

#: The token rows, in no particular order (overlaps are settled by priority, then length).
TOKEN_ROWS: tuple[RegexRule | Rule, ...] = (
    Rule("private_key", P_BLOCK, find_private_keys, ("PRIVATE KEY", "PuTTY-User-Key")),
    # --- detect-secrets plugin regexes ---------------------------------------------------
    RegexRule("aws_access_key", ds.AWS[0], ("A3T", "ABIA", "ACCA", "AKIA", "ASIA"),
              left=True, right=True),
    RegexRule("aws_secret_key", ds.AWS[1], ("aws",), nocase=True, group=1),
    RegexRule("azure_storage_key", ds.AZURE_STORAGE[0], ("AccountKey=",),
              inner=re.compile(r"(?<=AccountKey=)[A-Za-z0-9+/=]+")),
    RegexRule("url_password", ds.BASIC_AUTH[0], ("://",), priority=P_URL, group=1,
              check=url_password_ok),
    # The IBM/Cloudant/SoftLayer regexes are slow (an optional prefix tried at every
    # position), so they run only when their vendor prefix occurs; without the prefix
    # the same assignments are covered by our assignment and high-entropy rules.
    RegexRule("cloudant_credential", ds.CLOUDANT[0], _CLOUDANT_HINTS, nocase=True, group=1),
    RegexRule("cloudant_credential", ds.CLOUDANT[1], _CLOUDANT_HINTS, nocase=True, group=1),
    RegexRule("cloudant_credential", ds.CLOUDANT[2], ("cloudant.com",), nocase=True, group=1),
    RegexRule("cloudant_credential", ds.CLOUDANT[3], ("cloudant.com",), nocase=True, group=1),
    RegexRule("discord_bot_token", ds.DISCORD[0], ("M", "N", "O"), left=True, check=mixed),
    RegexRule("github_token", ds.GITHUB[0], ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
              left=True, extend=True),
    *(
        RegexRule("gitlab_token", pattern, ("gl", "GR1348941"), left=True, extend=True)
        for pattern in ds.GITLAB
    ),
    RegexRule("ibm_credential", ds.IBM_CLOUD_IAM[0], _IBM_IAM_HINTS, nocase=True, group=1,
              check=mixed),
    RegexRule("ibm_credential", ds.IBM_COS_HMAC[0], _IBM_COS_HINTS, nocase=True, group=1),
    RegexRule("mailchimp_api_key", ds.MAILCHIMP[0], (re.compile(r"-us\d"),),
              left=True, right=True),
    # .npmrc "//registry/:_authToken=…" (as detect-secrets' NpmDetector, whose leading
    # ".+" is quadratic on long lines with many "//"; the registry part is not needed).
    RegexRule("npm_token", r":_authToken=[ \t]*(?P<v>[^\s\"'`\\]+)", ("_authToken",),
              group="v", check=_not_placeholder),
    RegexRule("openai_api_key", ds.OPENAI[0], ("T3BlbkFJ",), left=True, extend=True),
    RegexRule("pypi_token", ds.PYPI[0], ("pypi-",), left=True, extend=True),
    RegexRule("pypi_token", ds.PYPI[1], ("pypi-",), left=True, extend=True),
    RegexRule("sendgrid_api_key", ds.SENDGRID[0], ("SG.",), left=True, extend=True),
    RegexRule("slack_token", ds.SLACK[0], ("xox",), nocase=True, left=True, extend=True),
    RegexRule("slack_webhook", ds.SLACK[1], ("hooks.slack.com",), nocase=True, left=True,
              extend=True),
    RegexRule("softlayer_credential", ds.SOFTLAYER[0], _SOFTLAYER_HINTS, nocase=True, group=1),
    RegexRule("softlayer_credential", ds.SOFTLAYER[1], ("api.softlayer.com",), nocase=True,
              group=1),
    RegexRule("square_oauth_secret", ds.SQUARE_OAUTH[0], ("sq0csp-",), left=True, extend=True),
    RegexRule("stripe_key", ds.STRIPE[0], ("k_live_",), left=True, extend=True),
    RegexRule("telegram_bot_token", ds.TELEGRAM[0], (":",), left=True, right=True,
              check=mixed),
    # ds.TWILIO[0] (AC…, an account SID) is left out: the SID identifies the account, its
    # auth token is the secret (the assignment rules find TWILIO_AUTH_TOKEN=…).
    RegexRule("twilio_key", ds.TWILIO[1], ("SK",), left=True, right=True, check=mixed),
    RegexRule("artifactory_token", ds.ARTIFACTORY[0], ("AKC",),
              inner=re.compile(r"AKC[a-zA-Z0-9]{10,}"), check=mixed),
    # --- our own shapes (prefixes and lengths after gitleaks' rules) -----------------------
    # anthropic.go: sk-ant-api03-/admin01-/oat01-/ort01- keys.
    RegexRule("anthropic_api_key", _LB + r"sk-ant-[a-z]{2,8}\d{0,3}-[A-Za-z0-9_-]{20,}",
              ("sk-ant-",), left=True, extend=True),
    # openai.go: sk-proj-/sk-svcacct-/sk-admin- and legacy sk- keys; we do not require
    # the T3BlbkFJ marker, and check the body looks random instead.
    RegexRule("openai_api_key", _LB + r"sk-(?!ant-)[A-Za-z0-9_-]{20,}", ("sk-",),
              left=True, check=_openai_check),
    # gcp.go: AIza + 35.
    RegexRule("google_api_key", _LB + r"AIza[0-9A-Za-z_-]{35}", ("AIza",),
              left=True, extend=True),
    RegexRule("google_oauth_secret", _LB + r"GOCSPX-[0-9A-Za-z_-]{20,}", ("GOCSPX-",),
              left=True, extend=True),
    RegexRule("google_oauth_token", _LB + r"ya29\.[0-9A-Za-z_-]{20,}", ("ya29.",),
              left=True, extend=True, check=mixed),
    # github.go: fine-grained PATs; classic prefixes also with longer bodies.
    RegexRule("github_token", _LB + r"github_pat_[A-Za-z0-9_]{22,}", ("github_pat_",),
              left=True, extend=True),
    RegexRule("github_token", _LB + r"gh[pousr]_[A-Za-z0-9]{30,}", ("gh",),
              left=True, extend=True, check=_body_after(4, mixed)),
    # gitlab.go: glpat- is covered by detect-secrets; nothing to add.
    # slack.go: app-level tokens and any xox?- token detect-secrets misses.
    RegexRule("slack_token", _LB + r"xox[a-z]-[A-Za-z0-9-]{10,}", ("xox",),
              left=True, extend=True, check=_body_after(5, mixed)),
    RegexRule("slack_token", _LB + r"xapp-\d-[A-Za-z0-9-]{10,}", ("xapp-",),
              left=True, extend=True),
    # stripe.go: secret and restricted keys, live and test, any length.
    RegexRule("stripe_key", _LB + r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
              ("k_live_", "k_test_"), left=True, extend=True),
    # huggingface.go: hf_ + 34 letters; api_org_ + 34 (organisation tokens); digits and
    # longer bodies occur too.
    RegexRule("huggingface_token", _LB + r"(?:hf|api_org)_[A-Za-z0-9]{30,}(?![A-Za-z0-9])",
              ("hf_", "api_org_"), left=True, check=_huggingface_check),
    # groq.go: gsk_ + 48 alphanumerics.
    RegexRule("groq_api_key", _LB + r"gsk_[A-Za-z0-9]{40,}", ("gsk_",),
              left=True, extend=True, check=_body_after(4, mixed)),
    # pypi.go: any PyPI macaroon (upload and test tokens both start "pypi-AgE").
    RegexRule("pypi_token", _LB + r"pypi-AgE[A-Za-z0-9_-]{50,}", ("pypi-",),
              left=True, extend=True),
    # langsmith.go: lsv2_pt_/lsv2_sk_ + 32 + _ + 10.
    RegexRule("langsmith_api_key", _LB + r"lsv2_(?:pt|sk)_[A-Za-z0-9]{32}_[A-Za-z0-9]{10}",
              ("lsv2_",), left=True, extend=True),
    # aws_secret_access_key = …: 40 characters after the name, quoted or not (the
    # detect-secrets rule above needs quotes).
    RegexRule("aws_secret_key",
              NoCase(r"aws_?secret_?(?:access_?)?key[\"'`]?\]?[ \t]*(?::=|=>|=|:)[ \t]*[\"'`]?"
                     r"(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+=])"),
              ("aws",), nocase=True, group="v", check=mixed),
    # header.payload[.signature]; the header of a JWT is base64url JSON, hence "eyJ".
    RegexRule("jwt", _LB_RE + r"eyJ[A-Za-z0-9_-]{5,}={0,2}\.[A-Za-z0-9_-]{5,}={0,2}"
              r"(?:\.[A-Za-z0-9_-]*={0,2})?",
              ("eyJ",), priority=P_JWT, left=True, check=ds.valid_jwt),
    # stripe.go: webhook signing secrets.
    RegexRule("stripe_key", _LB + r"whsec_[A-Za-z0-9+/]{24,}", ("whsec_",), left=True,
              extend=True, check=_body_after(6, mixed)),
    # telegram.go, in a bot API URL (".../bot<token>/getMe"), where detect-secrets'
    # rule, anchored on a word start, does not look.
    RegexRule("telegram_bot_token", r"(?<![0-9])[0-9]{8,10}:AA[0-9A-Za-z_-]{33}", (":AA",),
              right=True),
    # mailgun.go: key-<32 hex> (the newer <32 hex>-<8 hex>-<8 hex> keys are bare hex
    # to the bare rule).
    RegexRule("mailgun_api_key", _LB + r"key-[0-9a-f]{32}", ("key-",), left=True, right=True),
    # discord.go: webhook URLs carry their token in the path.
    RegexRule("discord_webhook",
              r"discord(?:app)?\.com/api/(?:v\d+/)?webhooks/[0-9]{5,30}/(?P<v>[A-Za-z0-9_-]{40,})",
              ("/webhooks/",), group="v"),
    # Signed URLs: Azure SAS (sig=), AWS SigV4 and Google V4 query signatures.
    RegexRule("signature",
              NoCase(r"[?&](?:sig|x-amz-signature|x-amz-security-token|x-goog-signature)"
                     r"=(?P<v>[^&#\s\"'`<>]{16,})"),
              ("sig=", "-signature=", "-token="), nocase=True, group="v",
              check=_not_placeholder),
    # sentry.go: a DSN's key (and legacy secret) before "@…sentry…/<project>"; the
    # catalogue knows Sentry's auth tokens, not its DSNs.
    RegexRule("sentry_token",
              r"(?<=://)(?P<v>[0-9a-f]{32}(?::[0-9a-f]{32})?)@[A-Za-z0-9.-]*sentry[A-Za-z0-9.-]*"
              r"(?::\d+)?/\d+",
              ("sentry",), nocase=False, group="v"),
    # google: OAuth refresh tokens ("1//0…").
    RegexRule("google_oauth_token", r"(?<![A-Za-z0-9/])1//0[0-9A-Za-z_-]{40,}", ("1//0",),
              extend=True, check=mixed),
    # Vendors gitleaks knows by prefix where our shape is broader than the catalogue's
    # (linear.go: OAuth tokens; notion.go: legacy secret_; hashicorp.go: short and
    # recovery tokens; tailscale.go: auth keys; grafana.go: shorter cloud tokens;
    # doppler.go: service tokens; supabase.go; newrelic.go; square.go; sentry.go; heroku.go;
    # dropbox.go; mapbox.go; flyio.go: fo1_). Shopify, DigitalOcean, Databricks, Postman,
    # age, Replicate, Pulumi, xAI, Perplexity, Atlassian and npm tokens are the
    # catalogue's alone.
    *(
        RegexRule(kind, _LB + pattern, hints, left=True, extend=True, check=_not_placeholder)
        for kind, pattern, hints in (
            ("linear_api_key", r"lin_(?:api|oauth)_[A-Za-z0-9]{40}", ("lin_",)),
            ("notion_token", r"(?:ntn_[0-9]{11}[A-Za-z0-9]{32,}|secret_[A-Za-z0-9]{43})",
             ("ntn_", "secret_")),
            ("vault_token", r"hv[sbr]\.[A-Za-z0-9_-]{24,}", ("hvs.", "hvb.", "hvr.")),
            ("tailscale_key", r"tskey-[a-z]+-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}", ("tskey-",)),
            ("grafana_token",
             r"(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2})",
             ("glsa_", "glc_")),
            ("doppler_token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{1,30}\.)?"
             r"[A-Za-z0-9]{40,}", ("dp.",)),
            ("supabase_token", r"sb(?:p|_secret)_[a-f0-9A-Za-z_-]{32,}", ("sbp_", "sb_secret_")),
            ("newrelic_key", r"NR(?:AK|AA|II|JS)-[A-Za-z0-9]{20,}", ("NRAK-", "NRAA-", "NRII-",
                                                                   "NRJS-")),
            ("square_token", r"(?:sq0atp-[0-9A-Za-z_-]{22}|EAAA[A-Za-z0-9_-]{60})",
             ("sq0atp-", "EAAA")),
            ("sentry_token", r"sntr[ysu]_[A-Za-z0-9_=+/-]{40,}", ("sntr",)),
            ("heroku_token", r"HRKU-[A-Za-z0-9_-]{58,}", ("HRKU-",)),
            ("dropbox_token", r"sl\.[A-Za-z0-9_-]{130,}", ("sl.",)),
            ("mapbox_token", r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}", ("sk.eyJ",)),
            ("flyio_token", r"fo1_[A-Za-z0-9_-]{43}", ("fo1_",)),
        )
    ),
)

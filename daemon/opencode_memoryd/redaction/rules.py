"""The rule table: every rule :func:`~opencode_memoryd.redaction.engine.redact` runs.

Most rules are one regex, written as a :class:`RegexRule` row (kind, pattern, hints,
priority, group and match options); the detect-secrets rows take their pattern from
:mod:`~opencode_memoryd.redaction.plugins`, ours are regex source here, with prefixes and
lengths learned from the gitleaks rule set (``cmd/generate/config/rules/*.go``). Rules that
need code are :class:`~opencode_memoryd.redaction.scan.Rule` rows whose finder lives in
:mod:`~opencode_memoryd.redaction.finders`. The order of the rows does not change the
output: overlaps are settled by priority, then length.

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from opencode_memoryd.redaction import plugins as ds
from opencode_memoryd.redaction.finders import (
    find_assignments,
    find_auth_header,
    find_bearer,
    find_cli,
    find_high_entropy,
    find_private_keys,
)
from opencode_memoryd.redaction.heuristics import is_placeholder, mixed, mixed_case
from opencode_memoryd.redaction.scan import (
    P_ASSIGN,
    P_BLOCK,
    P_ENTROPY,
    P_HEADER,
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


def compile_rule(row: RegexRule) -> Rule:
    """The :class:`Rule` for one table row (its finder is a :func:`regex_finder`)."""
    pattern = re.compile(row.pattern) if isinstance(row.pattern, str) else row.pattern
    gate: tuple[str, ...] = ()
    if row.nocase and all(isinstance(h, str) for h in row.hints):
        gate = tuple(h for h in row.hints if isinstance(h, str))
    finder = regex_finder(
        pattern,
        group=row.group,
        inner=row.inner,
        left_boundary=row.left,
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
    """An ``sk-`` key whose body (after any ``proj-``-like label) looks random."""
    body = value[3:]
    for p in ("proj-", "svcacct-", "admin-", "None-"):
        if body.startswith(p):
            body = body[len(p):]
            break
    return len(body) >= 20 and mixed(body) and mixed_case(body) and not is_placeholder(body)


def _url_password_ok(value: str) -> bool:
    return not is_placeholder(value) and "$" not in value


def _not_placeholder(value: str) -> bool:
    return not is_placeholder(value)


def _huggingface_check(value: str) -> bool:
    return mixed_case(value.split("_")[-1]) and not is_placeholder(value)


# --------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------

# Our token regexes start with this: a token never starts inside another token. Besides
# avoiding matches inside longer runs, it keeps every regex linear (no retry at each of
# many repeated prefixes, e.g. "eyJeyJeyJ…").
_LB = r"(?<![A-Za-z0-9_-])"

_CLOUDANT_HINTS = ("cloudant", "clou", "cl_", "cl-", "clkey", "clpw", "clpass", "clapi", "cltoken")
_IBM_IAM_HINTS = ("ibm", "iam_", "iam-", "iamapi", "iamkey", "iampass", "iampwd", "iamtoken")
_IBM_COS_HINTS = ("ibm", "cos_", "cos-", "coshmac", "cossecret", "hmac")
_SOFTLAYER_HINTS = ("softlayer", "sl_", "sl-", "slapi", "slkey", "slpass", "slpwd", "sltoken")

_TABLE: tuple[RegexRule | Rule, ...] = (
    Rule("private_key", P_BLOCK, find_private_keys, ("PRIVATE KEY", "PuTTY-User-Key")),
    # --- detect-secrets plugin regexes ---------------------------------------------------
    RegexRule("aws_access_key", ds.AWS[0], ("A3T", "ABIA", "ACCA", "AKIA", "ASIA"),
              left=True, right=True),
    RegexRule("aws_secret_key", ds.AWS[1], ("aws",), nocase=True, group=1),
    RegexRule("azure_storage_key", ds.AZURE_STORAGE[0], ("AccountKey=",),
              inner=re.compile(r"(?<=AccountKey=)[A-Za-z0-9+/=]+")),
    RegexRule("url_password", ds.BASIC_AUTH[0], ("://",), priority=P_URL, group=1,
              check=_url_password_ok),
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
    RegexRule("twilio_key", ds.TWILIO[0], ("AC",), left=True, right=True, check=mixed),
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
    # huggingface.go: hf_ + 34 letters; api_org_ + 34 letters (organisation tokens).
    RegexRule("huggingface_token", _LB + r"(?:hf|api_org)_[A-Za-z]{34}(?![A-Za-z0-9])",
              ("hf_", "api_org_"), left=True, check=_huggingface_check),
    # groq.go: gsk_ + 48 alphanumerics.
    RegexRule("groq_api_key", _LB + r"gsk_[A-Za-z0-9]{40,}", ("gsk_",),
              left=True, extend=True, check=_body_after(4, mixed)),
    # npm.go: npm_ + 36 alphanumerics (detect-secrets only knows the .npmrc form).
    RegexRule("npm_token", _LB + r"npm_[A-Za-z0-9]{36}", ("npm_",),
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
    RegexRule("jwt", _LB + r"eyJ[A-Za-z0-9_-]{5,}={0,2}\.[A-Za-z0-9_-]{5,}={0,2}"
              r"(?:\.[A-Za-z0-9_-]*={0,2})?",
              ("eyJ",), priority=P_JWT, left=True, check=ds.valid_jwt),
    # --- context ---------------------------------------------------------------------------
    RegexRule("url_password", r"://:(?P<v>[^\s/@:?#\"'`]+)@", ("://:",), priority=P_URL,
              group="v", check=_url_password_ok),
    Rule("bearer_token", P_HEADER, find_bearer, ("bearer",), hints_nocase=True),
    Rule("bearer_token", P_HEADER, find_auth_header("bearer_token"), ("authorization",),
         hints_nocase=True),
    Rule("basic_auth", P_HEADER, find_auth_header("basic_auth"), ("authorization",),
         hints_nocase=True),
    Rule("password", P_HEADER, find_cli, ("-u", "--user", "--", "machine")),
    # Reports password / secret / token / api_key / private_key by the assigned name.
    Rule("password", P_ASSIGN, find_assignments, ("pass", "pwd", "secret", "token", "key"),
         hints_nocase=True),
    Rule("high_entropy", P_ENTROPY, find_high_entropy,
         ("key", "secret", "token", "pass", "pwd", "cred", "auth", "api"), hints_nocase=True),
)

#: Every rule, compiled, in table order.
RULES: tuple[Rule, ...] = tuple(
    compile_rule(row) if isinstance(row, RegexRule) else row for row in _TABLE
)

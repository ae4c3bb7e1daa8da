"""Everything the redaction rules take from ``detect-secrets`` 1.5.0; the only module importing it.

* Plugin regexes: each ``RegexBasedDetector`` plugin's ``denylist``, as a tuple of compiled
  patterns in the plugin's own order (the rule table picks them by index). The rules run them
  with ``finditer`` to get positions; this module never calls ``scan_line`` (it changes
  process-wide settings) nor any network verifier.
* Heuristic filters from ``detect_secrets.filters.heuristic`` (UUIDs, templated values,
  ``$NAME`` values, sequential strings), re-exported unchanged as plain functions.
* The JWT validity check of ``JwtTokenDetector`` and the Shannon-entropy calculators of the
  base64 and hex high-entropy plugins, as plain functions.
"""

from __future__ import annotations

import re
from collections.abc import Callable

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
    "ARTIFACTORY",
    "AWS",
    "AZURE_STORAGE",
    "BASIC_AUTH",
    "CLOUDANT",
    "DISCORD",
    "GITHUB",
    "GITLAB",
    "IBM_CLOUD_IAM",
    "IBM_COS_HMAC",
    "MAILCHIMP",
    "OPENAI",
    "PYPI",
    "SENDGRID",
    "SLACK",
    "SOFTLAYER",
    "SQUARE_OAUTH",
    "STRIPE",
    "TELEGRAM",
    "TWILIO",
    "base64_entropy",
    "hex_entropy",
    "is_potential_uuid",
    "is_prefixed_with_dollar_sign",
    "is_sequential_string",
    "is_templated_secret",
    "valid_jwt",
]


def _denylist(plugin: type) -> tuple[re.Pattern[str], ...]:
    """The compiled ``denylist`` regexes of a detect-secrets ``RegexBasedDetector`` class."""
    patterns: tuple[re.Pattern[str], ...] = tuple(plugin.denylist)  # type: ignore[attr-defined]
    return patterns


# One tuple per plugin, in the plugin's order; comments say what each index matches.
ARTIFACTORY = _denylist(ArtifactoryDetector)  # 0: AKC… API token, 1: AP… password
AWS = _denylist(AWSKeyDetector)  # 0: access key id, 1: quoted secret key after "aws…secret"
AZURE_STORAGE = _denylist(AzureStorageKeyDetector)  # 0: AccountKey=…
BASIC_AUTH = _denylist(BasicAuthDetector)  # 0: scheme://user:password@
CLOUDANT = _denylist(CloudantDetector)  # 0, 1: assignments; 2, 3: cloudant.com URLs
DISCORD = _denylist(DiscordBotTokenDetector)  # 0: bot token
GITHUB = _denylist(GitHubTokenDetector)  # 0: classic gh?_ tokens of 36 characters
GITLAB = _denylist(GitLabTokenDetector)  # every gl…- token shape
IBM_CLOUD_IAM = _denylist(IbmCloudIamDetector)  # 0: assignment
IBM_COS_HMAC = _denylist(IbmCosHmacDetector)  # 0: assignment
MAILCHIMP = _denylist(MailchimpDetector)  # 0: 32 hex + -usN
OPENAI = _denylist(OpenAIDetector)  # 0: sk-… keys with the T3BlbkFJ marker
PYPI = _denylist(PypiTokenDetector)  # 0: pypi.org token, 1: test.pypi.org token
SENDGRID = _denylist(SendGridDetector)  # 0: SG.….…
SLACK = _denylist(SlackDetector)  # 0: xox?- token, 1: hooks.slack.com webhook URL
SOFTLAYER = _denylist(SoftlayerDetector)  # 0: assignment, 1: api.softlayer.com URL
SQUARE_OAUTH = _denylist(SquareOAuthDetector)  # 0: sq0csp-…
STRIPE = _denylist(StripeDetector)  # 0: sk_live_/rk_live_ + 24
TELEGRAM = _denylist(TelegramBotTokenDetector)  # 0: bot token
TWILIO = _denylist(TwilioKeyDetector)  # 0: AC… account SID, 1: SK… key SID


def valid_jwt(value: str) -> bool:
    """Whether the header and payload of ``header.payload[.signature]`` decode to JSON.

    The formal check of detect-secrets' ``JwtTokenDetector``, applied to the first two parts
    only (a signature is not base64 JSON).
    """
    header_payload = ".".join(value.split(".")[:2])
    return bool(JwtTokenDetector.is_formally_valid(header_payload))


#: Shannon entropy in bits per character of a string over the base64 alphabet (``str -> float``).
base64_entropy: Callable[[str], float] = Base64HighEntropyString(
    limit=4.5
).calculate_shannon_entropy
#: Shannon entropy in bits per character of a hex string (``str -> float``); detect-secrets
#: lowers it for all-digit strings.
hex_entropy: Callable[[str], float] = HexHighEntropyString(limit=3.0).calculate_shannon_entropy

"""The maintained rule catalogue (kingfisher-secret-scanner) inside ``redact``.

Token shapes only the catalogue knows are redacted at the right place in any text (non-ASCII,
lone surrogates, several per line, from several threads), with our kinds; identifiers it
also knows (client ids, tenant ids, URLs, publishable keys) are not. Tokens are assembled
from pieces so that this file holds nothing a scanner would flag.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from opencode_memoryd.redaction.catalog import catalog_kind
from opencode_memoryd.redaction.engine import redact
from redaction_gen import URLSAFE, Gen, jwt

G = Gen(7)
DOCKER = "dckr" + "_pat_" + G.s(27, URLSAFE)
RUBYGEMS = "rubyg" + "ems_" + G.s(48, "0123456789abcdef")
CARTESIA = "sk" + "_car_" + G.s(20)


@pytest.mark.parametrize(("rule_id", "kind"), [
    ("betterleaks.groq-api-key", "groq_api_key"),
    ("betterleaks.anthropic-admin-api-key", "anthropic_api_key"),
    ("betterleaks.dockerhub-personal-access-token", "token"),
    ("betterleaks.abuseipdb-api-key.1", "token"),
    ("veles.secrets/grokxaiapikey", "xai_api_key"),
    ("betterleaks.azure-tenant-id", None),
    ("betterleaks.plaid-client-id", None),
    ("betterleaks.supabase-project-url", None),
    ("betterleaks.snowflake-account-host.1", None),
    ("betterleaks.lob-pub-api-key", None),
    ("betterleaks.posthog-project-api-key", None),
    ("betterleaks.curl-auth-user", None),
    ("betterleaks.slack-webhook-url", "slack_webhook"),
    ("betterleaks.supabase-project-api-key", "supabase_token"),
    ("betterleaks.alibaba-access-key-id", "aws_access_key"),
    ("betterleaks.generic-credential-uri", None),
])
def test_catalog_rule_ids_map_to_our_kinds_or_to_nothing(rule_id: str, kind: str | None) -> None:
    assert catalog_kind(rule_id) == kind


@pytest.mark.parametrize(("before", "between", "after"), [
    ("push with ", " and ", " please"),
    ("Привет, токен ", " и ещё ", " — спасибо"),
    ("デプロイ用のトークンは ", " と ", " です 🎉"),
    ("broken \ud800 pair ", " \udfff ", " end"),
    ("", ";\n", ""),
])
def test_catalogue_tokens_are_cut_out_exactly_in_any_text(before: str, between: str,
                                                          after: str) -> None:
    text = before + DOCKER + between + RUBYGEMS + between + CARTESIA + after
    out = redact(text)
    assert out.text == (before + "[REDACTED:token]" + between + "[REDACTED:token]" + between
                        + "[REDACTED:token]" + after)
    assert out.counts == {"token": 3}


def test_the_catalogue_is_shared_by_threads() -> None:
    texts = [f"line {i}: {DOCKER} {RUBYGEMS}" for i in range(200)]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda t: redact(t).text, texts))
    assert outs == [f"line {i}: [REDACTED:token] [REDACTED:token]" for i in range(200)]


def test_an_escaped_quote_after_a_token_stays() -> None:
    token = jwt(Gen(3))
    text = json.dumps({"output": json.dumps({"id_token": token, "n": 1})})
    out = redact(text).text
    assert out == json.dumps({"output": json.dumps({"id_token": "[REDACTED:jwt]", "n": 1})})
    json.loads(json.loads(out)["output"])  # still JSON inside JSON


def test_without_the_package_our_own_rules_still_run() -> None:
    # As on an Intel Mac, where kingfisher-secret-scanner has no wheel: importing it fails.
    github = "gh" + "p_" + G.s(36)
    code = ("import sys; sys.modules['kingfisher_sdk'] = None\n"
            "from opencode_memoryd.redaction.engine import redact\n"
            f"print(redact({f'push {github} and {DOCKER}'!r}).text)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == f"push [REDACTED:github_token] and {DOCKER}"


def test_the_compiled_catalogue_is_cached_under_our_own_cache_folder(tmp_path: Path) -> None:
    # no KF_RULE_CACHE_DIR: the cache goes under $XDG_CACHE_HOME/opencode-memoryd, never
    # into a folder of Kingfisher's own name in the home
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "KF_RULE_CACHE_DIR"}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    github = "gh" + "p_" + G.s(36)
    code = ("from opencode_memoryd.redaction.engine import redact\n"
            f"print(redact({f'push {github}'!r}).text)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120, env=env)
    assert done.stdout.strip() == "push [REDACTED:github_token]"
    ours = home / ".cache" / "opencode-memoryd" / "kingfisher"
    assert ours.is_dir() and any(ours.rglob("*"))
    assert sorted(p.name for p in (home / ".cache").iterdir()) == ["opencode-memoryd"]

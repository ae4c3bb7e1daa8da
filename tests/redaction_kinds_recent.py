"""Corpus kinds of services added lately, and assignments whose value has any shape.

:data:`RECENT_KINDS` are provider token shapes of services launched or re-keyed in the last
years (Groq, xAI, Perplexity, Replicate, Render, Vercel, Cloudflare, Neon, Resend …), each
in a setting where it shows up in a coding session; the shapes follow the providers'
documented prefixes and lengths (learned from the betterleaks rule set). :data:`ANY_VALUE_KINDS`
are ``KEY=`` / ``TOKEN=`` / ``SECRET=`` / ``PASSWORD=`` / ``*_API_KEY:`` assignments in env,
YAML, JSON, TOML, shell and command-line form whose value has no telling shape (a UUID, a
plain word with digits, a short hex string). Prefixes are assembled from pieces so that no
literal here looks like a secret to a scanner. Used by ``tests/redaction_corpus.py``.
"""

from __future__ import annotations

import string
import uuid

from redaction_gen import ALNUM, B64, HEX, SK, URLSAFE, Gen, Template, one

LOWER_ALNUM = string.ascii_lowercase + string.digits
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _uuid(g: Gen) -> str:
    return str(uuid.UUID(int=g.rng.getrandbits(128), version=4))


def _gcp_service_account(g: Gen) -> tuple[str, tuple[str, ...]]:
    key_id = g.s(40, HEX)
    body = [g.s(64, B64) for _ in range(4)]
    pem = ("-----" + "BEGIN PRIVATE KEY-----\\n" + "\\n".join(body)
           + "\\n-----" + "END PRIVATE KEY-----\\n")
    text = ('{"type": "service_account", "project_id": "acme-prod", '
            f'"private_key_id": "{key_id}", "private_key": "{pem}", '
            '"client_email": "ci@acme-prod.iam.gserviceaccount.com", '
            '"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs"}')
    return text, (key_id, *body)


def _servicebus(g: Gen) -> tuple[str, tuple[str, ...]]:
    key = g.s(43, B64) + "="
    return ("Endpoint=sb://acme-bus.servicebus.windows.net/;SharedAccessKeyName="
            f"RootManageSharedAccessKey;SharedAccessKey={key}"), (key,)


def _sentry_dsn(g: Gen) -> tuple[str, tuple[str, ...]]:
    key = g.s(32, HEX)
    return f"SENTRY_DSN=https://{key}@o{g.digits(6)}.ingest.sentry.io/{g.digits(7)}", (key,)


# fmt: off
RECENT_KINDS: dict[str, list[Template]] = {
    "anthropic_admin": [
        one("ANTHROPIC_ADMIN_KEY={}", lambda g: SK + "-ant-" + "admin01-" + g.s(93, URLSAFE) + "AA"),
    ],
    "groq": [
        one("GROQ_API_KEY={}", lambda g: "gs" + "k_" + g.s(52)),
        one("client = Groq(api_key=\"{}\")", lambda g: "gs" + "k_" + g.s(52)),
    ],
    "xai": [
        one("XAI_API_KEY={}", lambda g: "xa" + "i-" + g.s(80)),
        one("curl https://api.x.ai/v1/chat -H 'x-api-key: {}'", lambda g: "xa" + "i-" + g.s(80)),
    ],
    "perplexity": [
        one("PPLX_API_KEY={}", lambda g: "pp" + "lx-" + g.s(48)),
        one("the perplexity key {} hit its quota", lambda g: "pp" + "lx-" + g.s(48)),
    ],
    "replicate": [
        one("export REPLICATE_API_TOKEN={}", lambda g: "r" + "8_" + g.s(37)),
        one("{} is my replicate token", lambda g: "r" + "8_" + g.s(37)),
    ],
    "databricks": [
        one("DATABRICKS_TOKEN={}", lambda g: "da" + "pi" + g.s(32, HEX)),
        one("databricks configure --token {}", lambda g: "da" + "pi" + g.s(32, HEX)),
    ],
    "doppler": [
        one("DOPPLER_TOKEN={}", lambda g: "dp" + ".pt." + g.s(43)),
        one("doppler setup --token {}", lambda g: "dp" + ".st.prd." + g.s(43)),
    ],
    "pulumi": [
        one("PULUMI_ACCESS_TOKEN={}", lambda g: "pu" + "l-" + g.s(40, HEX)),
    ],
    "linear": [
        one("LINEAR_API_KEY={}", lambda g: "lin" + "_api_" + g.s(40)),
        one("Authorization: {}", lambda g: "lin" + "_api_" + g.s(40)),
    ],
    "notion": [
        one("NOTION_TOKEN={}", lambda g: "nt" + "n_" + g.digits(11) + g.s(35)),
        one("notion = Client(auth=\"{}\")", lambda g: "sec" + "ret_" + g.s(43)),
    ],
    "supabase": [
        one("SUPABASE_ACCESS_TOKEN={}", lambda g: "sb" + "p_" + g.s(40, LOWER_ALNUM)),
        one("supabase login --token {}", lambda g: "sb" + "p_" + g.s(40, LOWER_ALNUM)),
    ],
    "vercel": [
        one("VERCEL_TOKEN={}", lambda g: g.s(24)),
        one("vercel deploy --token {}", lambda g: "vc" + "p_" + g.s(56, URLSAFE)),
    ],
    "cloudflare": [
        one("CLOUDFLARE_API_TOKEN={}", lambda g: g.s(40, URLSAFE)),
        one("origin key {}", lambda g: "v1" + ".0-" + g.s(24, HEX) + "-" + g.s(146, HEX)),
    ],
    "shopify": [
        one("SHOPIFY_ACCESS_TOKEN={}", lambda g: "shp" + "at_" + g.s(32, HEX)),
        one("X-Shopify-Access-Token: {}", lambda g: "shp" + "ss_" + g.s(32, HEX)),
    ],
    "age": [
        one("# created: 2025-01-01\n{}", lambda g: "AGE-" + "SECRET-KEY-1" + g.s(58, BECH32)),
    ],
    "sentry": [
        one("SENTRY_AUTH_TOKEN={}", lambda g: "sntr" + "yu_" + g.s(64, HEX)),
        _sentry_dsn,
    ],
    "twilio_auth": [
        one("TWILIO_AUTH_TOKEN={}", lambda g: g.s(32, HEX)),
        one("twilio_auth_token: \"{}\"", lambda g: g.s(32, HEX)),
    ],
    "postmark": [
        one("POSTMARK_SERVER_TOKEN={}", _uuid),
        one("postmark_api_token: {}", _uuid),
    ],
    "digitalocean": [
        one("DIGITALOCEAN_TOKEN={}", lambda g: "do" + "p_v1_" + g.s(64, HEX)),
        one("doctl auth init -t {}", lambda g: "do" + "p_v1_" + g.s(64, HEX)),
    ],
    "flyio": [
        one("FLY_API_TOKEN=\"{}\"", lambda g: "Fly" + "V1 fm2_" + g.s(120, B64)),
        one("fly deploy --access-token {}", lambda g: "fo" + "1_" + g.s(43, URLSAFE)),
    ],
    "render": [
        one("RENDER_API_KEY={}", lambda g: "rn" + "d_" + g.s(28)),
    ],
    "railway": [
        one("RAILWAY_TOKEN={}", _uuid),
        one("railway_api_token = \"{}\"", _uuid),
    ],
    "netlify": [
        one("NETLIFY_AUTH_TOKEN={}", lambda g: "nf" + "p_" + g.s(36)),
    ],
    "atlassian": [
        one("JIRA_API_TOKEN={}", lambda g: "ATA" + "TT3" + g.s(180, URLSAFE)),
    ],
    "okta": [
        one("OKTA_API_TOKEN={}", lambda g: "00" + g.s(40, URLSAFE)),
        one("okta token: {}", lambda g: "00" + g.s(40)),
    ],
    "azure_connection": [
        _servicebus,
        one("AZURE_APPCONFIG=Endpoint=https://acme.azconfig.io;Id=Ab1-l0-s0:x1;Secret={}", lambda g: g.s(44, B64)),
    ],
    "gcp_service_account": [
        _gcp_service_account,
    ],
    "openrouter": [
        one("OPENROUTER_API_KEY={}", lambda g: SK + "-or-v1-" + g.s(64, HEX)),
    ],
    "deepseek": [
        one("DEEPSEEK_API_KEY={}", lambda g: SK + "-" + g.s(32, HEX)),
    ],
    "together": [
        one("TOGETHER_API_KEY={}", lambda g: "tg" + "p_v1_" + g.s(43, URLSAFE)),
    ],
    "neon": [
        one("NEON_API_KEY={}", lambda g: "na" + "pi_" + g.s(64)),
    ],
    "resend": [
        one("RESEND_API_KEY={}", lambda g: "r" + "e_" + g.s(8, BASE58) + "_" + g.s(24, BASE58)),
    ],
    "planetscale": [
        one("DATABASE_PASSWORD={}", lambda g: "psc" + "ale_pw_" + g.s(43, URLSAFE)),
    ],
    "mistral": [
        one("MISTRAL_API_KEY={}", lambda g: g.s(32)),
    ],
    "cohere": [
        one("CO_API_KEY={}", lambda g: g.s(40)),
    ],
}

# Short token shapes of newer services, stated with no key word: the catalogue knows them
# by prefix, entropy alone misses them.
BARE_RECENT: dict[str, list[Template]] = {
    "recent_bare": [
        one("the new one is {} -- swap it in", lambda g: "dckr" + "_pat_" + g.s(27, URLSAFE)),
        one("use {} for the CI job", lambda g: "dckr" + "_oat_" + g.s(32, URLSAFE)),
        one("try {} now", lambda g: "sm" + "_pat_" + g.s(16)),
        one("it's {} on prod", lambda g: "dvc" + "_server_" + g.s(24)),
        one("rotated to {}", lambda g: "unk" + "ey_" + g.s(24)),
        one("paste {} there", lambda g: "uc" + "at_" + g.s(28)),
        one("{} works again", lambda g: "li" + "p_" + g.s(20)),
        one("and {} for the voices", lambda g: "sk" + "_car_" + g.s(20)),
        one("swapped in {}", lambda g: "ic" + "o-" + g.s(32)),
        one("the deploy key {} expired", lambda g: "AP" + "I-" + g.s(26, string.ascii_uppercase + string.digits)),
        one("login with {}", lambda g: "LT" + "AI" + g.s(20)),
        one("here: {}", lambda g: "vt" + "wn_" + g.s(24, URLSAFE)),
        one("set {} in the dashboard", lambda g: "pn" + "u_" + g.s(36)),
        one("the runner uses {}", lambda g: "CCI" + "PAT_" + g.s(22) + "_" + g.s(40, HEX)),
        one("old: {}", lambda g: "ph" + "x_" + g.s(43, URLSAFE)),
        one("{} belongs to the bot", lambda g: "fi" + "gd_" + g.s(40, URLSAFE)),
        one("using {}", lambda g: "nva" + "pi-" + g.s(64, URLSAFE)),
        one("and then {}", lambda g: "ll" + "x-" + g.s(48)),
        one("scoped {}", lambda g: "pcs" + "k_" + g.s(6) + "_" + g.s(63)),
        one("the gem push key {}", lambda g: "rubyg" + "ems_" + g.s(48, HEX)),
    ],
}

ANY_VALUE_KINDS: dict[str, list[Template]] = {
    "assign_uuid": [
        one("API_TOKEN={}", _uuid),
        one("export SERVICE_SECRET={}", _uuid),
        one("auth_token: {}", _uuid),
        one('"apiKey": "{}"', _uuid),
        one("session_secret = \"{}\"", _uuid),
        one("--token {}", _uuid),
        one("--api-key={}", _uuid),
    ],
    "assign_plain": [
        one("SECRET={}", lambda g: g.pick(["hunter", "letmein", "dragon", "monkey"]) + g.digits(3)),
        one("DB_PASSWORD={}", lambda g: g.pick(["postgres", "rootroot", "acme"]) + g.digits(4)),
        one("SLACK_SIGNING_SECRET={}", lambda g: g.s(32, HEX)),
        one("WEBHOOK_KEY: {}", lambda g: g.s(12, LOWER_ALNUM)),
        one("OPENAI_API_KEY: {}", lambda g: g.s(20, ALNUM)),
        one("[auth]\ntoken = \"{}\"", lambda g: g.s(16, HEX)),
        one("KEY={}", lambda g: g.s(24, LOWER_ALNUM)),
        one("heroku config:set API_SECRET={}", lambda g: g.s(20, LOWER_ALNUM)),
    ],
}
# fmt: on

"""Tests of opencode_memoryd.redaction.engine.

Every secret below is assembled at run time from a prefix and deterministic random
characters, so that this file itself contains nothing a secret scanner would flag.
"""

from __future__ import annotations

import base64
import json
import random
import string
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from opencode_memoryd.redaction.engine import (
    KINDS,
    Redacted,
    RedactionCounter,
    merge_counts,
    placeholder,
    redact,
)

_RNG = random.Random(20240611)
_ALNUM = string.ascii_letters + string.digits
_UPPER_DIGITS = string.ascii_uppercase + string.digits


def _rand(n: int, alphabet: str = _ALNUM) -> str:
    """A random-looking string with letters of both cases and a digit (when possible)."""
    while True:
        s = "".join(_RNG.choice(alphabet) for _ in range(n))
        classes = [
            set(alphabet) & set(string.digits),
            set(alphabet) & set(string.ascii_lowercase),
            set(alphabet) & set(string.ascii_uppercase),
        ]
        if all(not c or set(s) & c for c in classes):
            return s


def _b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


_PEM_KIND = "RSA " + "PRIVATE" + " KEY"
_PEM_BEGIN = "-----" + "BEGIN " + _PEM_KIND + "-----"
_PEM_END = "-----" + "END " + _PEM_KIND + "-----"
_PEM_BODY = [_rand(64, _ALNUM + "+/") for _ in range(4)]
_PEM_BLOCK = "\n".join([_PEM_BEGIN, *_PEM_BODY, _PEM_END])

_JWT = (
    _b64url({"alg": "HS256", "typ": "JWT"})
    + "."
    + _b64url({"sub": "1234567890", "name": "dev", "iat": 1700000000})
    + "."
    + _rand(43, _ALNUM + "-_")
)

# (before, secret, after, kind): the input is before + secret + after, and the expected
# output is exactly before + "[REDACTED:kind]" + after.
_TP = [
    # --- provider tokens ---------------------------------------------------------------
    ("export OPENAI_API_KEY=", "sk-" + "proj-" + _rand(40, _ALNUM + "-_") + "T3Blb" + "kFJ"
     + _rand(40), "\n", "openai_api_key", "openai-project"),
    ("key = '", "sk-" + _rand(48), "'", "openai_api_key", "openai-legacy"),
    ("ANTHROPIC_API_KEY=", "sk-" + "ant-" + "api03-" + _rand(93, _ALNUM + "-_") + "AA", "",
     "anthropic_api_key", "anthropic"),
    ("use ", "sk-" + "ant-" + "oat01-" + _rand(80, _ALNUM + "-_"), " for oauth",
     "anthropic_api_key", "anthropic-oauth"),
    ('google: "', "AI" + "za" + _rand(35, _ALNUM + "-_"), '"', "google_api_key", "google"),
    ("id=", "AK" + "IA" + _rand(16, _UPPER_DIGITS), " region=eu-west-1", "aws_access_key",
     "aws-access-key-id"),
    ("aws_secret_access_key = ", _rand(40, _ALNUM + "/+"), "\n", "aws_secret_key",
     "aws-secret-ini"),
    ('AWS_SECRET_ACCESS_KEY: "', _rand(40, _ALNUM + "/+"), '"', "aws_secret_key",
     "aws-secret-yaml"),
    ("git remote set-url origin https://x:", "gh" + "p_" + _rand(36), "@github.com/o/r.git",
     "github_token", "github-classic-in-url"),
    ("GH_TOKEN=", "gh" + "o_" + _rand(36), "", "github_token", "github-oauth"),
    ("token ", "gh" + "s_" + _rand(36), ".", "github_token", "github-server"),
    ("", "github_" + "pat_" + _rand(22) + "_" + _rand(59, _ALNUM + "_"), " is my PAT",
     "github_token", "github-fine-grained"),
    ("CI_TOKEN=", "gl" + "pat-" + _rand(20, _ALNUM + "-_"), "", "gitlab_token", "gitlab"),
    ("SLACK=", "xo" + "xb-" + "123456789012-1234567890123-" + _rand(24), "", "slack_token",
     "slack-bot"),
    ("stripe.api_key = '", "sk" + "_live_" + _rand(99), "'", "stripe_key", "stripe-secret"),
    ("", "rk" + "_live_" + _rand(24), "", "stripe_key", "stripe-restricted"),
    ("HF_TOKEN=", "h" + "f_" + _rand(34, string.ascii_letters), " python app.py",
     "huggingface_token", "huggingface"),
    ('"', "gs" + "k_" + _rand(52), '"', "groq_api_key", "groq"),
    ("//registry.npmjs.org/:_authToken=", "np" + "m_" + _rand(36), "\n", "npm_token",
     "npm-npmrc"),
    ("NPM_TOKEN=", "np" + "m_" + _rand(36), "", "npm_token", "npm-env"),
    ("password = ", "py" + "pi-" + "AgEIcHlwaS5vcmc" + _rand(120, _ALNUM + "-_"), "\n",
     "pypi_token", "pypi"),
    ("", "S" + "G." + _rand(22, _ALNUM + "-_") + "." + _rand(43, _ALNUM + "-_"), "",
     "sendgrid_api_key", "sendgrid"),
    ("key sid ", "S" + "K" + _rand(32, string.digits + "abcdef"), " ok", "twilio_key", "twilio"),
    ("LANGSMITH_API_KEY=", "lsv" + "2_pt_" + _rand(32, string.digits + "abcdef") + "_"
     + _rand(10, string.digits + "abcdef"), "", "langsmith_api_key", "langsmith"),
    ("conn: DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=",
     _rand(86, _ALNUM + "+/") + "==", ";", "azure_storage_key", "azure-storage"),
    ("", _JWT, "", "jwt", "jwt"),
    ('{"id_token": "', _JWT, '"}', "jwt", "jwt-in-json"),
    # --- headers, CLI, URLs --------------------------------------------------------------
    ("curl -H 'Authorization: Bearer ", _rand(40, _ALNUM + "._-"), "' https://api.x.io",
     "bearer_token", "bearer-header"),
    ("Authorization: Basic ", base64.b64encode(b"user:" + _rand(12).encode()).decode(), "",
     "basic_auth", "basic-header"),
    ("postgres://app:", _rand(16), "@db.internal:5432/app", "url_password", "url-postgres"),
    ("REDIS_URL=redis://:", _rand(20), "@cache:6379/0", "url_password", "url-empty-user"),
    ("curl -u admin:", _rand(12), " https://x.io", "password", "curl-user"),
    ("machine api.example.com login me password ", _rand(14), "", "password", "netrc"),
    ("mysql --password ", _rand(12), " -h db", "password", "cli-flag"),
    # --- assignments -----------------------------------------------------------------------
    ("password=", "hunter2", "", "password", "password-env"),
    ('PASSWORD: "', "correct-Horse-7", '"', "password", "password-yaml-quoted"),
    ("DB_PASSWORD=", "postgres", "\nDB_USER=app", "password", "password-bare-word-env"),
    ('{"password": "', "p@ssw0rd!", '", "user": "bob"}', "password", "password-json"),
    ("secret = '", "s3cr3t-" + _rand(10), "'", "secret", "secret-quoted"),
    ("client_secret: ", _rand(32), "\n", "secret", "client-secret-yaml"),
    ("api_key=", _rand(24), "&q=1", "api_key", "api-key-query-string"),
    ("token: ", _rand(24), "", "token", "token-yaml"),
    ("export FOO_TOKEN=", _rand(30), "\n", "token", "export-token"),
    ("config['auth_token'] = \"", _rand(30), '"', "token", "subscript-token"),
    ('const apiKey = "', _rand(32), '";', "api_key", "camel-case-api-key"),
    ("private_key: ", _rand(64, string.hexdigits.lower()), "", "private_key",
     "private-key-hex"),
    ("PGPASSWORD=", _rand(12), " psql -h db", "password", "env-prefix-command"),
    # --- high entropy next to a key word -------------------------------------------------
    ("my api key is ", _rand(40), " thanks", "high_entropy", "entropy-prose"),
    ("webhook secret ", _rand(48, string.digits + "abcdef"), "", "high_entropy",
     "entropy-hex"),
]
TRUE_POSITIVES = [pytest.param(b, s, a, k, id=i) for b, s, a, k, i in _TP]


@pytest.mark.parametrize(("before", "secret", "after", "kind"), TRUE_POSITIVES)
def test_true_positive(before: str, secret: str, after: str, kind: str) -> None:
    result = redact(before + secret + after)
    assert secret not in result.text
    assert result.text == before + f"[REDACTED:{kind}]" + after
    assert result.counts == {kind: 1}


FALSE_POSITIVES = [
    pytest.param(s, id=i)
    for i, s in [
        ("git-sha", "commit 3f2a9b1c4d5e6f708192a3b4c5d6e7f801234567\nAuthor: Dev"),
        ("git-short-sha", "a1b2c3d fix(auth): refresh token before expiry (#42)"),
        ("sha-near-token-word", "fixed the token bug in 3f2a9b1c4d5e6f708192a3b4c5d6e7f801234567"),
        ("uuid", "request_id=123e4567-e89b-12d3-a456-426614174000 status=200"),
        ("uuid-key", "idempotency key 123e4567-e89b-12d3-a456-426614174000"),
        ("path", "/usr/local/lib/python3.11/site-packages/opencode_memoryd/redaction.py"),
        ("url", "https://github.com/org/repo/blob/main/src/auth/token.py#L10"),
        ("url-user-no-password", "ssh://git@github.com/org/repo.git"),
        ("prose-password", "Next I'll reset the password flow and add a password strength meter."),
        ("prose-colon", "Password: reset it from the admin page"),
        ("prose-bearer", "the Bearer token goes in the Authorization header"),
        ("base64-image", "data:image/png;base64,"
         + base64.b64encode(bytes(_RNG.randrange(256) for _ in range(600))).decode()),
        ("versions", "Successfully installed pydantic-2.7.1 requests==2.32.3 numpy 1.26.4"),
        ("css", "color: #1e1e2e; background: #ff00aa;"),
        ("identifier", "api_key = get_api_key_from_env()"),
        ("token-count", "token_count = 5"),
        ("max-tokens", "response = client.create(model=m, max_tokens=1000)"),
        ("placeholder-angle", "password=<your-password>"),
        ("placeholder-dollar-brace", "api_key=${API_KEY}"),
        ("placeholder-dollar", 'curl -H "Authorization: Bearer $TOKEN"'),
        ("placeholder-your", "OPENAI_API_KEY=your_api_key_here"),
        ("placeholder-mask", "password: ********"),
        ("placeholder-x-token", "gh" + "p_" + "x" * 36),
        ("placeholder-truncated", "keys look like sk-... and start with sk-proj-"),
        ("placeholder-url", "postgres://user:<password>@localhost:5432/db"),
        ("placeholder-url-env", "postgres://user:${DB_PASS}@localhost:5432/db"),
        ("os-environ", 'api_key = os.environ["API_KEY"]'),
        ("getenv", 'token = os.getenv("GITHUB_TOKEN", "")'),
        ("attribute", "client = Client(api_key=self.api_key, token=settings.token)"),
        ("kwarg-passthrough", "login(username=username, password=password)"),
        ("type-annotation", "def login(user: str, password: str) -> Token:"),
        ("optional-annotation", "    token: str | None = None"),
        ("f-string-header", 'headers = {"Authorization": f"Bearer {token}"}'),
        ("call", "token = tokenizer.encode(text)"),
        ("class-value", "            token = Keyword"),
        ("constant-label", '_SEND_MESSAGE_TOKEN = "send_message"'),
        ("env-var-name", 'key_name = "OPENAI_API_KEY"'),
        ("pwd-env", "PWD=/srv/dev/project"),
        ("k8s", "kind: Secret\nmetadata:\n  name: db\nsecretName: my-secret"),
        ("cache-key", "cache_key = 'user:123:profile'"),
        ("primary-key", "id = Column(Integer, primary_key=True)"),
        ("ttl", "password_reset_token_ttl = 3600"),
        ("password-stdin", "docker login --password-stdin < token.txt"),
        ("pem-public", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n"
         + "-----END PUBLIC KEY-----"),
        ("sha256-key-name", '{"key_sha256": "' + _rand(64, string.digits + "abcdef") + '"}'),
        ("docker-digest", "image@sha256:" + _rand(64, string.digits + "abcdef")),
        ("npm-integrity", '"integrity": "sha512-' + _rand(86, _ALNUM + "+/") + '=="'),
        ("identifier-run", "auth auth_v2_handler_for_oauth_callbacks"),
        ("monkey", "monkey: " + "Bananas4TheMonkeyKing2024x"),
        ("empty-values", 'password = ""\npassword: null\napi_key=None'),
    ]
]


@pytest.mark.parametrize("text", FALSE_POSITIVES)
def test_false_positive_left_unchanged(text: str) -> None:
    result = redact(text)
    assert result.text == text
    assert result.counts == {}
    assert not result.changed


_MIXED = "\n".join(
    [
        "$ cat .env",
        "OPENAI_API_KEY=sk-" + "proj-" + _rand(60),
        "DATABASE_URL=postgres://app:" + _rand(16) + "@db:5432/app",
        "commit 3f2a9b1c4d5e6f708192a3b4c5d6e7f801234567",
        'headers = {"Authorization": "Bearer ' + _JWT + '"}',
        _PEM_BLOCK,
        "password: " + _rand(10),
        "done",
    ]
)


@pytest.mark.parametrize(
    "text",
    [pytest.param(b + s + a, id=i) for b, s, a, _, i in _TP] + [pytest.param(_MIXED, id="mixed")],
)
def test_idempotent(text: str) -> None:
    once = redact(text)
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.counts == {}


def test_placeholders_are_never_redacted_again() -> None:
    text = "\n".join(f"{k}: {placeholder(k)} password={placeholder(k)}" for k in sorted(KINDS))
    assert redact(text).text == text


def test_counts_per_kind() -> None:
    key1 = "AK" + "IA" + _rand(16, _UPPER_DIGITS)
    key2 = "AK" + "IA" + _rand(16, _UPPER_DIGITS)
    result = redact(f"first {key1}\nsecond {key2}\npassword={_rand(10)}\n")
    assert result.counts == {"aws_access_key": 2, "password": 1}
    assert result.total == 3
    assert result.changed
    assert key1 not in result.text and key2 not in result.text
    # Counts never carry secret values.
    assert all(k in KINDS and isinstance(v, int) for k, v in result.counts.items())


def test_overlapping_findings_count_once_as_most_specific_kind() -> None:
    result = redact("Authorization: Bearer " + _JWT)
    assert result.text == "Authorization: Bearer [REDACTED:jwt]"
    assert result.counts == {"jwt": 1}


def test_mixed_transcript() -> None:
    result = redact(_MIXED)
    assert result.counts == {
        "jwt": 1,
        "openai_api_key": 1,
        "password": 1,
        "private_key": 1,
        "url_password": 1,
    }
    assert "commit 3f2a9b1c4d5e6f708192a3b4c5d6e7f801234567" in result.text
    assert result.text.startswith("$ cat .env\nOPENAI_API_KEY=[REDACTED:openai_api_key]\n")
    assert result.text.endswith("\n[REDACTED:private_key]\npassword: [REDACTED:password]\ndone")


# --- private keys ----------------------------------------------------------------------


def test_pem_block_fully_removed() -> None:
    text = "Here is the key:\n" + _PEM_BLOCK + "\nKeep it safe."
    result = redact(text)
    assert result.text == "Here is the key:\n[REDACTED:private_key]\nKeep it safe."
    assert result.counts == {"private_key": 1}
    for line in _PEM_BODY:
        assert line not in result.text
    assert "BEGIN" not in result.text and "END" not in result.text


def test_pem_block_with_escaped_newlines_in_json() -> None:
    text = json.dumps({"output": _PEM_BLOCK + "\n"})  # newlines become \n escapes
    result = redact(text)
    assert result.text == '{"output": "[REDACTED:private_key]\\n"}'


def test_unterminated_pem_block_runs_to_end_of_text() -> None:
    text = "cat id_rsa\n" + "\n".join([_PEM_BEGIN, *_PEM_BODY[:2]])
    result = redact(text)
    assert result.text == "cat id_rsa\n[REDACTED:private_key]"


def test_pem_header_mentioned_alone_only_removes_header() -> None:
    text = "Look for a line like " + _PEM_BEGIN + " at the top of the file."
    result = redact(text)
    assert result.text == "Look for a line like [REDACTED:private_key] at the top of the file."


def test_openssh_and_encrypted_variants() -> None:
    for label in ("OPENSSH " + "PRIVATE KEY", "ENCRYPTED " + "PRIVATE KEY", "PRIVATE KEY",
                  "EC " + "PRIVATE KEY"):
        block = f"-----BEGIN {label}-----\n{_PEM_BODY[0]}\n-----END {label}-----"
        assert redact("x\n" + block + "\ny").text == "x\n[REDACTED:private_key]\ny"


# --- URLs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scheme", "user", "host"),
    [
        ("postgresql+psycopg", "app", "db.internal:5432/app?sslmode=require"),
        ("mongodb+srv", "admin", "cluster0.abcde.mongodb.net/test"),
        ("https", "deploy", "git.example.com/group/repo.git"),
        ("amqp", "guest", "rabbit:5672/"),
    ],
)
def test_url_password_removed_but_scheme_user_host_kept(scheme: str, user: str, host: str) -> None:
    pw = _rand(18)
    result = redact(f"url = '{scheme}://{user}:{pw}@{host}'")
    assert result.text == f"url = '{scheme}://{user}:[REDACTED:url_password]@{host}'"
    assert result.counts == {"url_password": 1}


# --- robustness --------------------------------------------------------------------------


def test_empty_and_type_errors() -> None:
    assert redact("") == Redacted("", {})
    with pytest.raises(TypeError):
        redact(b"password=hunter2")  # type: ignore[arg-type]


def test_non_ascii_text_whose_lowercase_changes_length() -> None:
    # "İ".lower() is two characters long: the case-insensitive rules must still line up.
    secret = _rand(20)
    text = "İstanbul İ " + "API_KEY=" + secret + " İ"
    assert redact(text).text == "İstanbul İ API_KEY=[REDACTED:api_key] İ"


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("eyJ" * 100_000, id="repeated-jwt-prefix"),
        pytest.param("sk-" * 100_000, id="repeated-openai-prefix"),
        pytest.param("gh" + "p_" * 100_000, id="repeated-github-prefix"),
        pytest.param("//a/" * 50_000 + ":_authToken=x", id="npmrc-long-line"),
        pytest.param("-----BEGIN " + "A" * 300_000, id="pem-no-label"),
        pytest.param("password: abc, " * 20_000, id="many-assignments"),
    ],
)
def test_pathological_inputs_are_linear(text: str) -> None:
    start = time.perf_counter()
    redact(text)
    assert time.perf_counter() - start < 10


def test_thread_safe_and_does_not_touch_detect_secrets_settings() -> None:
    from detect_secrets.settings import get_settings

    before = get_settings().json()
    texts = [b + s + a for b, s, a, _, _ in _TP] * 4
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(redact, texts))
    assert results == [redact(t) for t in texts]
    assert get_settings().json() == before


# --- counting helpers ------------------------------------------------------------------


def test_merge_counts() -> None:
    a = {"jwt": 1, "password": 2}
    b = {"password": 1, "aws_access_key": 3}
    assert merge_counts(a, b) == {"aws_access_key": 3, "jwt": 1, "password": 3}
    assert merge_counts() == {}
    assert merge_counts({"jwt": 0}) == {}
    assert a == {"jwt": 1, "password": 2}  # inputs untouched


def test_redaction_counter() -> None:
    counter = RedactionCounter()
    counter.add(redact("password=" + _rand(10)))
    counter.add(redact("nothing here"))
    counter.add({"jwt": 2})
    assert counter.counts == {"jwt": 2, "password": 1}
    assert counter.total == 3
    assert counter.reset() == {"jwt": 2, "password": 1}
    assert counter.counts == {} and counter.total == 0


def test_placeholder_and_kinds() -> None:
    assert placeholder("aws_access_key") == "[REDACTED:aws_access_key]"
    with pytest.raises(ValueError):
        placeholder("not_a_kind")
    for _, _, _, kind, _ in _TP:
        assert kind in KINDS
    assert {"aws_access_key", "private_key", "password", "jwt", "openai_api_key"} <= KINDS

"""Negative redaction corpus: text that looks random or secret-adjacent but holds no secret.

Commit SHAs (full and short), UUIDs, content hashes (sha1/sha256/sha512/md5), npm/yarn/pnpm
integrity strings, base64 data-URI images, long identifiers, file paths, version strings,
URLs without credentials, lockfile lines, Docker image digests, public keys and
certificates, and prose about passwords and tokens; each in the kind of line where it shows
up in a coding session. Generated with a seeded RNG (:data:`NEGATIVES`, deterministic).
``redact`` must leave each item unchanged.

Used by ``tests/test_redaction_corpus.py`` and ``bench/redaction_corpus.py``.
"""

from __future__ import annotations

import base64
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from redaction_negatives_ids import ID_TEMPLATES

SEED = 20250102
HEX = "0123456789abcdef"
ALNUM = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Negative:
    """One item of the negative corpus: its category and text."""

    kind: str
    text: str


class _G:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def hex(self, n: int) -> str:
        return "".join(self.rng.choice(HEX) for _ in range(n))

    def s(self, n: int, alphabet: str = ALNUM) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def b64bytes(self, n: int, magic: bytes = b"") -> str:
        return base64.b64encode(magic + bytes(self.rng.randrange(256) for _ in range(n))).decode()

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def pick(self, items: list[str]) -> str:
        return self.rng.choice(items)


Item = Callable[[_G], str]

_PNG = b"\x89PNG\r\n\x1a\n"
_WORDS = ["fix", "add", "refactor", "bump", "docs", "test", "chore", "revert", "feat"]
_FILES = ["src/app.py", "dist/app-1.4.2.tar.gz", "README.md", "web/index.html", "go.mod"]

# fmt: off
TEMPLATES: dict[str, list[Item]] = {
    "commit_sha": [
        lambda g: f"git show {g.hex(40)} --stat",
        lambda g: f"git diff {g.hex(40)}..{g.hex(40)} -- src/",
        lambda g: f" {g.hex(40)} vendor/libfoo (v1.2.3)",
        lambda g: f"100644 blob {g.hex(40)}\tREADME.md",
        lambda g: f"    uses: actions/checkout@{g.hex(40)} # v4",
        lambda g: f'"reference": "{g.hex(40)}",',
        lambda g: f"{g.hex(40)} HEAD@{{0}}: commit: fix the token refresh",
        lambda g: f"commit {g.hex(40)}\nAuthor: Dev <dev@acme.io>\nDate:   Mon Jan 8 10:00:00 2024",
        lambda g: f"git checkout {g.hex(40)}",
        lambda g: f"bash git rev-parse HEAD -> {g.hex(40)}",
        lambda g: f"Merge {g.hex(40)} into main",
        lambda g: f"The fix landed in {g.hex(40)} on main.",
        lambda g: f"{g.hex(40)}\trefs/heads/main",
        lambda g: f"From {g.hex(40)} Mon Sep 17 00:00:00 2001",
        lambda g: f"https://github.com/acme/app/commit/{g.hex(40)}",
        lambda g: f'{{"sha": "{g.hex(40)}", "node_id": "C_kwDOA"}}',
        lambda g: f"This reverts commit {g.hex(40)}.",
        lambda g: f"(cherry picked from commit {g.hex(40)})",
        lambda g: f"HEAD detached at {g.hex(40)}",
        lambda g: f"bash git log --format=%H -3 -> {g.hex(40)} {g.hex(40)} {g.hex(40)}",
        lambda g: f"tree {g.hex(40)}\nparent {g.hex(40)}",
        lambda g: f"I reset the branch to {g.hex(40)} and force-pushed.",
        lambda g: f"rev = \"{g.hex(40)}\"",
    ],
    "short_sha": [
        lambda g: f"{g.hex(7)} {g.pick(_WORDS)}(auth): refresh token before expiry (#{g.rng.randint(1, 999)})",
        lambda g: f"[main {g.hex(7)}] {g.pick(_WORDS)}: update password reset email",
        lambda g: f"index {g.hex(7)}..{g.hex(7)} 100644",
        lambda g: f"HEAD is now at {g.hex(9)} bump version",
        lambda g: f"Fast-forward {g.hex(10)}..{g.hex(10)}",
    ],
    "uuid": [
        lambda g: f"x-amz-id-2: {g.b64bytes(56)}",
        lambda g: f"pi_3{g.s(23)} succeeded",
        lambda g: f"ses_{g.hex(12)}{g.s(14)} {g.pick(['idle', 'busy'])}",
        lambda g: f"call_{g.s(24)} -> ok",
        lambda g: f"chatcmpl-{g.s(29)}",
        lambda g: f"toolu_01{g.s(22)}",
        lambda g: f"STRIPE_PUBLISHABLE_KEY=pk_live_{g.s(99)}",
        lambda g: f"request_id={g.uuid()} status=200",
        lambda g: f"idempotency key {g.uuid()}",
        lambda g: f'{{"id": "{g.uuid()}", "tenant": "{g.uuid()}"}}',
        lambda g: f"session {g.uuid()} started",
        lambda g: f"X-Request-Id: {g.uuid().upper()}",
        lambda g: f"trace_id={g.hex(32)} span_id={g.hex(16)}",
        lambda g: f"traceparent: 00-{g.hex(32)}-{g.hex(16)}-01",
        lambda g: f"job id: {uuid.UUID(int=g.rng.getrandbits(128)).hex}",
    ],
    "content_hash": [
        lambda g: f'{{"alg": "SHA-256",\n  "content": "{g.hex(64)}"}}',
        lambda g: f"Signature: {g.hex(32)}",
        lambda g: f"content-hash = \"{g.hex(64)}\"",
        lambda g: f"gpg --recv-keys {g.hex(40).upper()}",
        lambda g: f"Thumbprint: {g.hex(40).upper()}",
        lambda g: f"X-Hub-Signature-256: sha256={g.hex(64)}",
        lambda g: f"checksum: 10c0/{g.hex(128)}",
        lambda g: f"bash sha256sum {g.pick(_FILES)} -> {g.hex(64)}  {g.pick(_FILES)}",
        lambda g: f"sha256: {g.hex(64)}",
        lambda g: f"md5sum -> {g.hex(32)}  backup.sql",
        lambda g: f"SHA1 ({g.pick(_FILES)}) = {g.hex(40)}",
        lambda g: f'{{"checksum": "{g.hex(64)}", "size": 1024}}',
        lambda g: f'ETag: "{g.hex(32)}"',
        lambda g: f"checksum = \"{g.hex(64)}\"",
        lambda g: f"requests==2.32.3 --hash=sha256:{g.hex(64)}",
        lambda g: f"x-amz-content-sha256: {g.hex(64)}",
        lambda g: f"oid sha256:{g.hex(64)}\nsize 48213",
        lambda g: f"The file hash is {g.hex(64)}, same as the release.",
        lambda g: f"sha512: {g.hex(128)}",
    ],
    "integrity": [
        lambda g: f'"integrity": "sha512-{g.b64bytes(64)}"',
        lambda g: f"  integrity sha512-{g.b64bytes(64)}",
        lambda g: f"    resolution: {{integrity: sha512-{g.b64bytes(64)}}}",
        lambda g: f'<script src="/app.js" integrity="sha384-{g.b64bytes(48)}" crossorigin="anonymous"></script>',
        lambda g: f'  hash = "sha256-{g.b64bytes(32)}";',
        lambda g: f'"integrity": "sha1-{g.b64bytes(20)}"',
    ],
    "data_uri_image": [
        lambda g: f"data:image/png;base64,{g.b64bytes(300, _PNG)}",
        lambda g: f'<img src="data:image/jpeg;base64,{g.b64bytes(400, bytes([255, 216, 255]))}" />',
        lambda g: f"background: url(data:image/gif;base64,{g.b64bytes(120, b'GIF89a')});",
        lambda g: f"![chart](data:image/webp;base64,{g.b64bytes(200, b'RIFF')})",
        lambda g: f"src: url(data:font/woff2;base64,{g.b64bytes(500)}) format('woff2');",
        lambda g: f'"image_url": "data:image/svg+xml;base64,{base64.b64encode(b"<svg xmlns=" + g.s(200).encode()).decode()}"',
    ],
    "long_identifier": [
        lambda g: f"def test_redaction_handles_{g.rng.randint(10, 99)}_cases_in_parallel_mode_v2():",
        lambda g: "class AbstractSingletonProxyFactoryBean" + str(g.rng.randint(1, 9)) + ":",
        lambda g: f"export function handleOAuth2CallbackForTenantV{g.rng.randint(2, 9)}(req, res) {{",
        lambda g: "import com.example.service.impl.UserAccountServiceImplementationV2;",
        lambda g: f"rustup target add {g.pick(['x86_64-unknown-linux-gnu', 'aarch64-apple-darwin', 'wasm32-unknown-unknown'])}",
        lambda g: f"const useInfiniteScrollPagination{g.rng.randint(2, 9)}WithPrefetch = () => {{}}",
        lambda g: "MAX_TOKENS_PER_REQUEST_FOR_GPT4_TURBO_2024_04_09 = 4096",
        lambda g: "get_user_by_id_and_tenant_with_permissions_v3(user_id, tenant_id)",
        lambda g: "auth auth_v2_handler_for_oauth_callbacks",
        lambda g: "SELECT * FROM user_password_reset_tokens_2024_archive WHERE used = false;",
        lambda g: "    api_key_rotation_interval_days: int = 90",
        lambda g: "ResourceGroupDeploymentValidationFailedException2024Q3",
    ],
    "file_path": [
        lambda g: f"/srv/dev/.cache/pip/wheels/{g.hex(2)}/{g.hex(2)}/{g.hex(60)}",
        lambda g: f"/nix/store/{g.s(32, '0123456789abcdfghijklmnpqrsvwxyz')}-python3-3.11.6/bin/python",
        lambda g: f"C:\\Users\\dev\\AppData\\Local\\Temp\\tmp{g.s(8)}\\report.xlsx",
        lambda g: "node_modules/.pnpm/@babel+core@7.24.0/node_modules/@babel/core/lib/index.js",
        lambda g: f"/tmp/pytest-of-dev/pytest-{g.rng.randint(1, 300)}/test_redaction0/data/secrets.json",
        lambda g: f".git/objects/{g.hex(2)}/{g.hex(38)}",
        lambda g: "src/components/UserProfile/UserProfileHeader.test.tsx",
        lambda g: f"~/.cache/huggingface/hub/models--bert-base-uncased/snapshots/{g.hex(40)}/config.json",
        lambda g: f"read /srv/app/static/js/main.{g.hex(8)}.chunk.js",
        lambda g: f"/var/lib/docker/overlay2/{g.hex(64)}/merged",
        lambda g: "/usr/local/lib/python3.11/site-packages/opencode_memoryd/redaction/engine.py",
        lambda g: f"~/.gradle/caches/modules-2/files-2.1/com.google.guava/guava/33.0.0-jre/{g.hex(40)}/guava-33.0.0-jre.jar",
    ],
    "version": [
        lambda g: f"Successfully installed pydantic-{g.rng.randint(1, 2)}.{g.rng.randint(0, 9)}.1 requests==2.32.3 numpy 1.26.4",
        lambda g: f"node v{g.rng.randint(16, 22)}.11.1 (npm 10.2.4)",
        lambda g: "torch==2.3.1+cu121 torchvision==0.18.1+cu121",
        lambda g: f"version: 1.0.0-beta.{g.rng.randint(1, 9)}+exp.sha.{g.hex(7)}",
        lambda g: "Python 3.12.3 (main, Apr 10 2024, 05:33:47) [GCC 13.2.0] on linux",
        lambda g: f"go1.22.{g.rng.randint(0, 5)} linux/amd64",
        lambda g: f"0.0.0-{g.rng.randint(20240101, 20241231)}{g.rng.randint(100000, 999999)}-{g.hex(12)}",
    ],
    "url": [
        lambda g: f"https://github.com/acme/app/blob/{g.hex(40)}/src/auth/token.py#L10",
        lambda g: f"https://drive.google.com/file/d/1{g.s(32, ALNUM + '-_')}/view?usp=sharing",
        lambda g: f"https://www.youtube.com/watch?v={g.s(11, ALNUM + '-_')}",
        lambda g: "https://docs.python.org/3/library/secrets.html#secrets.token_hex",
        lambda g: f"https://example.com/search?q=token+expired&page={g.rng.randint(1, 9)}",
        lambda g: "ssh://git@github.com/org/repo.git",
        lambda g: f"https://registry.npmjs.org/react/-/react-18.{g.rng.randint(0, 3)}.0.tgz",
        lambda g: f"https://acme.atlassian.net/browse/PLAT-{g.rng.randint(100, 9999)}?focusedCommentId={g.rng.randint(10**5, 10**6)}",
        lambda g: f"https://storage.googleapis.com/acme-builds/{g.hex(40)}/app.zip",
        lambda g: f"https://cdn.acme.io/assets/{g.s(22, ALNUM)}/logo.svg",
        lambda g: f"https://gist.github.com/dev/{g.hex(32)}",
        lambda g: f"postgres://app@db.internal:5432/app?sslmode=require&application_name=api{g.rng.randint(1, 9)}",
    ],
    "lockfile": [
        lambda g: f'"zh:{g.hex(64)}",',
        lambda g: f'"h1:{g.b64bytes(32)}",',
        lambda g: f"{g.s(32, 'abcdefghijklmnopqrstuvwxyz')}.dist-info/RECORD,sha256={g.b64bytes(32).rstrip('=')},1234",
        lambda g: f'narHash = "sha256-{g.b64bytes(32)}";',
        lambda g: f'  resolved "https://registry.yarnpkg.com/lodash/-/lodash-4.17.21.tgz#{g.hex(40)}"',
        lambda g: f"golang.org/x/net v0.{g.rng.randint(10, 30)}.0 h1:{g.b64bytes(32)}",
        lambda g: f"golang.org/x/net v0.{g.rng.randint(10, 30)}.0/go.mod h1:{g.b64bytes(32)}",
        lambda g: f'checksum = "{g.hex(64)}"\n[[package]]\nname = "serde"',
        lambda g: f'    {{file = "requests-2.32.3-py3-none-any.whl", hash = "sha256:{g.hex(64)}"}},',
        lambda g: f'      "shasum": "{g.hex(40)}",',
        lambda g: f'"node_modules/react": {{"version": "18.3.1", "resolved": "https://registry.npmjs.org/react/-/react-18.3.1.tgz", "integrity": "sha512-{g.b64bytes(64)}"}}',
        lambda g: f"  /@types/node@20.11.{g.rng.randint(0, 30)}:\n    resolution: {{integrity: sha512-{g.b64bytes(64)}}}",
    ],
    "docker_digest": [
        lambda g: f"image@sha256:{g.hex(64)}",
        lambda g: f"Digest: sha256:{g.hex(64)}",
        lambda g: f"docker pull nginx@sha256:{g.hex(64)}",
        lambda g: f"bash docker run -d -p 8080:80 nginx -> {g.hex(64)}",
        lambda g: f"{g.hex(12)}   nginx:1.25   \"/docker-entrypoint.…\"   2 hours ago   Up 2 hours",
        lambda g: f"Loaded image ID: sha256:{g.hex(64)}",
        lambda g: f" => => writing image sha256:{g.hex(64)} 0.0s",
    ],
    "public_material": [
        lambda g: f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.b64bytes(32)[:43]} dev@laptop",
        lambda g: f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQ{g.b64bytes(380)} dev@host",
        lambda g: "-----BEGIN CERTIFICATE-----\n" + "\n".join(g.b64bytes(48) for _ in range(5)) + "\n-----END CERTIFICATE-----",
        lambda g: "-----BEGIN PUBLIC KEY-----\n" + "\n".join(g.b64bytes(48) for _ in range(3)) + "\n-----END PUBLIC KEY-----",
        lambda g: f"Key fingerprint = {' '.join(g.hex(4).upper() for _ in range(10))}",
        lambda g: f"SHA256:{g.b64bytes(32).rstrip('=')} dev@laptop (ED25519)",
        lambda g: f"github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.b64bytes(32)[:43]}",
    ],
    "prose_and_code": [
        lambda g: "return BasicAuth(username=auth[0], password=auth[1])",
        lambda g: "        password: SecretBytes",
        lambda g: "class _EmptyClass: pass  # noqa: E701",
        lambda g: "flag to pass to :class:`parse_string` when running tests",
        lambda g: "credentials = scope_credentials(self.credentials, scopes=SCOPES)",
        lambda g: '_SEND_MESSAGE_TOKEN = "send_message"',
        lambda g: "The password hashing is done with bcrypt (cost 12).",
        lambda g: "the password is hashed with SHA-256 before storage",
        lambda g: "password must contain: 1 digit, 1 symbol",
        lambda g: "token: 4096",
        lambda g: "the api key is in 1Password under 'Stripe prod'",
        lambda g: "secret: true",
        lambda g: "mysql -u root -p",
        lambda g: "export PGPASSWORD",
        lambda g: f"{g.s(8)}.{g.s(4)}@example.com is the login email",
        lambda g: "if password == confirm_password:",
        lambda g: "password = getpass.getpass('Password: ')",
        lambda g: "hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())",
        lambda g: f"Set-Cookie: theme=dark; Max-Age={g.rng.randint(1000, 99999)}; Path=/",
        lambda g: "Use `npm login` and paste the token when asked.",
        lambda g: "Next I'll reset the password flow and add a password strength meter.",
        lambda g: "The password is required and must be at least 12 characters long.",
        lambda g: "password: reset it from the admin page",
        lambda g: "the Bearer token goes in the Authorization header",
        lambda g: 'api_key = os.environ["API_KEY"]',
        lambda g: "token = tokenizer.encode(text)",
        lambda g: "PWD=/srv/dev/project",
        lambda g: "docker login --password-stdin < token.txt",
        lambda g: "The db password is stored in Vault under secret/data/db.",
        lambda g: "my login password is the same as my email password, I'll rotate both.",
        lambda g: "use password authentication instead of keys for now",
        lambda g: "pass: 118 tests, fail: 0",
        lambda g: "PASS tests/auth/login.test.ts (5.2 s)",
        lambda g: "mysql -u root -p shop   # prompts for the password",
        lambda g: "sshpass -p \"$SSH_PASS\" ssh deploy@host",
        lambda g: "curl -u \"$USER:$TOKEN\" https://api.acme.io",
        lambda g: "redis-cli -a $REDIS_PASSWORD ping",
        lambda g: "PGPASSWORD=$DB_PASSWORD psql -h db",
        lambda g: "export GITHUB_TOKEN=$(gh auth token)",
        lambda g: "password=<your-password>",
        lambda g: 'token: str | None = None',
        lambda g: "color: #1e1e2e; background: #ff00aa;",
        lambda g: f"fe80::{g.hex(4)}:{g.hex(4)}:{g.hex(4)}:{g.hex(4)}%eth0",
        lambda g: f"arn:aws:iam::{g.rng.randint(10**11, 10**12 - 1)}:role/DeployRole",
        lambda g: f"i-0{g.hex(16)} running t3.medium",
        lambda g: f"<object object at 0x7f{g.hex(10)}>",
        lambda g: f"ObjectId(\"{g.hex(24)}\")",
        lambda g: f"api-deployment-{g.hex(10)}-{g.s(5, string.ascii_lowercase + string.digits)}   1/1   Running",
        lambda g: "2024-06-11T10:15:30.123456+00:00 INFO token refreshed for user 42",
        lambda g: f"cache_key = 'user:{g.rng.randint(1, 999)}:profile'",
        lambda g: "Use `ghp_` tokens only in CI; rotate them every 90 days.",
        lambda g: "keys look like sk-... and start with sk-proj-",
    ],
    "real_code": [
        lambda g: "t produced no stored result, so the daily\n   token budget sees them (:meth:`~app.state.items`)",
        lambda g: 'assert "The deploy token is" in refused[0]["proposed"]',
        lambda g: '"""Whether an assigned value is plausibly a literal secret (see :func:`find_assignments`)."""',
        lambda g: '        "EC_POINT_get_affine_coordinates_GF2m",',
        lambda g: '    "Cryptography_HAS_EC2M": cryptography_has_ec2m,',
        lambda g: "  return _VarUInt64ByteSizeNoTag(0xFFFFFFFFFFFFFFFF & int32)",
        lambda g: "    ELF_MAGIC_NUMBER = 0x7F454C46\n    ELFCLASS32 = 1\n    ELFCLASS64 = 2",
        lambda g: "#ifdef F2PY_REPORT_ATEXIT\nf2py_cb_start_clock();\n#endif",
        lambda g: '        Token: "#af5f5f",',
        lambda g: "    pass :paramref:`_sa.create_engine.json_serializer` to the engine",
        lambda g: '<a href="The-Closure-API.html#index-FFI_005fCLOSURES"><code>FFI_CLOSURES</code></a>',
        lambda g: '            oauth_signature="' + g.s(27) + '%3D",',
        lambda g: f"CACHEDIR.TAG Signature: {g.hex(32)}",
        lambda g: "m = Model(base64_str='VGhlc2UgYXJlbid0IHRoZSBkcm9pZHMgeW91J3JlIGxvb2tpbmcgZm9y')",
        lambda g: '            "30000000000000000000000000000000000000",',
        lambda g: "            return BasicAuth(username=auth_info[0], password=auth_info[2])",
    ],
}
# fmt: on


def build_negatives(per_template: int = 3, seed: int = SEED) -> list[Negative]:
    """``per_template`` items of every template, deterministic for ``seed``.

    Templates without randomness yield the same text each time; duplicates are dropped.
    """
    g = _G(seed)
    out: list[Negative] = []
    seen: set[str] = set()
    for kind, templates in {**TEMPLATES, **ID_TEMPLATES}.items():
        for template in templates:
            for _ in range(per_template):
                text = template(g)
                if text not in seen:
                    seen.add(text)
                    out.append(Negative(kind, text))
    return out


NEGATIVES: list[Negative] = build_negatives()

"""Positive redaction corpus: format-valid FAKE secrets of many kinds, in realistic text.

Every secret is generated at import time from a kind template and a seeded RNG, so this
file holds nothing a secret scanner would flag (prefixes are split) and the corpus is the
same on every run. :data:`CASES` places each secret in user, assistant and tool text; a
:class:`Case` lists the substrings that must be gone from ``redact(case.text).text``.

Used by ``tests/test_redaction_corpus.py`` and ``bench/redaction_corpus.py``; the negative
corpus is ``tests/redaction_negatives.py``.
"""

from __future__ import annotations

import base64
import json
import random
import string
import zlib
from collections.abc import Callable
from dataclasses import dataclass

SEED = 20250101
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


@dataclass(frozen=True)
class Case:
    """One planted secret: ``text`` (in ``role`` text) and the ``secrets`` that must vanish."""

    kind: str
    role: str
    text: str
    secrets: tuple[str, ...]


class Gen:
    """Random strings that look like real token bodies (every character class present)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def s(self, n: int, alphabet: str = ALNUM) -> str:
        classes = [set(alphabet) & set(c) for c in
                   (string.digits, string.ascii_lowercase, string.ascii_uppercase)]
        while True:
            out = "".join(self.rng.choice(alphabet) for _ in range(n))
            if n < 8 or all(not c or set(out) & c for c in classes):
                return out

    def digits(self, n: int) -> str:
        return str(self.rng.randint(1, 9)) + "".join(self.rng.choice(string.digits)
                                                     for _ in range(n - 1))

    def pick(self, items: list[str]) -> str:
        return self.rng.choice(items)

    def password(self) -> str:
        """A human-chosen-looking password with symbols such as ``&%#!$@``."""
        words = ["Tr0ub4dor", "Summer", "Blue", "Monkey", "Dragon", "Falcon", "Winter", "Kiwi"]
        sym = self.pick(["&", "%", "#", "!", "$", "@", "&3", "!!", "#1", "@%"])
        return (self.pick(words) + self.digits(2) + sym + self.s(4, string.ascii_lowercase)
                + self.pick(["", "!", "&9", "$x", "%2F"]))


def _b62(n: int, width: int) -> str:
    chars = string.digits + string.ascii_letters
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = chars[r] + out
    return out.rjust(width, "0")


def _github(g: Gen, prefix: str) -> str:
    body = g.s(30)
    return prefix + body + _b62(zlib.crc32(body.encode()), 6)  # GitHub's CRC32 checksum


def _b64url(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def _jwt(g: Gen) -> str:
    payload = {"sub": g.digits(8), "name": "dev", "iat": 1_700_000_000 + g.rng.randint(0, 9999)}
    return (_b64url({"alg": "HS256", "typ": "JWT"}) + "." + _b64url(payload) + "."
            + g.s(43, URLSAFE))


def _pem(g: Gen, label: str, lines: int = 6) -> tuple[str, tuple[str, ...]]:
    body = [g.s(64, B64) for _ in range(lines)] + [g.s(24, B64) + "=="]
    begin, end = "-----" + "BEGIN " + label + "-----", "-----" + "END " + label + "-----"
    return "\n".join([begin, *body, end]), tuple(body)


def _discord(g: Gen) -> str:
    uid = base64.b64encode(g.digits(18).encode()).decode().rstrip("=")
    return uid + "." + g.s(6, URLSAFE) + "." + g.s(38, URLSAFE)


# A template yields (snippet, secrets): the snippet is the secret in a natural setting
# (an assignment, a header, a command), the secrets are what must vanish.
Template = Callable[[Gen], tuple[str, tuple[str, ...]]]


def _one(fmt: str, make: Callable[[Gen], str]) -> Template:
    def t(g: Gen) -> tuple[str, tuple[str, ...]]:
        v = make(g)
        return fmt.format(v), (v,)
    return t


def _pem_t(label: str, fmt: str = "{}") -> Template:
    def t(g: Gen) -> tuple[str, tuple[str, ...]]:
        block, body = _pem(g, label)
        return fmt.format(block), body
    return t


def _split(fmt: str, make: Callable[[Gen], str]) -> Template:
    """A key whose value continues on the next line (cut somewhere in its middle)."""
    def t(g: Gen) -> tuple[str, tuple[str, ...]]:
        v = make(g)
        cut = g.rng.randint(len(v) // 3, 2 * len(v) // 3)
        return fmt.format(v[:cut] + "\n" + v[cut:]), (v[:cut], v[cut:])
    return t


def _cli(fmt: str) -> Template:
    def t(g: Gen) -> tuple[str, tuple[str, ...]]:
        v = g.password()
        return fmt.format(v), (v,)
    return t


# fmt: off
SK = "s" + "k"
KINDS: dict[str, list[Template]] = {
    "aws_access_key": [
        _one("AWS_ACCESS_KEY_ID={}", lambda g: "AK" + "IA" + g.s(16, string.ascii_uppercase + "234567")),
        _one('"AccessKeyId": "{}"', lambda g: "AS" + "IA" + g.s(16, string.ascii_uppercase + "234567")),
        _one("the key id {} belongs to ci", lambda g: "AK" + "IA" + g.s(16, string.ascii_uppercase + "234567")),
    ],
    "aws_secret_key": [
        _one("aws_secret_access_key = {}", lambda g: g.s(40, B64)),
        _one('"SecretAccessKey": "{}",', lambda g: g.s(40, B64)),
        _one("export AWS_SECRET_ACCESS_KEY={}", lambda g: g.s(40, B64)),
    ],
    "aws_session_token": [
        _one("aws_session_token = {}", lambda g: "FwoGZXIvYXdzE" + g.s(300, B64)),
        _one('"SessionToken": "{}"', lambda g: "IQoJb3JpZ2luX2Vj" + g.s(280, B64)),
    ],
    "github_classic": [
        _one("GITHUB_TOKEN={}", lambda g: _github(g, "gh" + "p_")),
        _one("git clone https://{}@github.com/acme/app.git", lambda g: _github(g, "gh" + "p_")),
        _one("token {}", lambda g: _github(g, "gh" + "p_")),
    ],
    "github_app": [
        _one("installation token: {}", lambda g: _github(g, "gh" + "s_")),
        _one("oauth {}", lambda g: _github(g, "gh" + "o_")),
        _one("{} (user-to-server)", lambda g: _github(g, "gh" + "u_")),
        _one("refresh_token={}", lambda g: _github(g, "gh" + "r_")),
    ],
    "github_fine_grained": [
        _one("{}", lambda g: "github_" + "pat_" + g.s(22, ALNUM) + "_" + g.s(59, ALNUM)),
        _one("GH_PAT: {}", lambda g: "github_" + "pat_" + g.s(22, ALNUM) + "_" + g.s(59, ALNUM)),
    ],
    "gitlab": [
        _one("CI_JOB_TOKEN={}", lambda g: "gl" + "pat-" + g.s(20, URLSAFE)),
        _one("git push https://oauth2:{}@gitlab.com/acme/app.git", lambda g: "gl" + "pat-" + g.s(20, ALNUM)),
        _one("runner token {}", lambda g: "gl" + "rt-" + g.s(20, ALNUM)),
        _one("deploy token {}", lambda g: "gl" + "dt-" + g.s(20, ALNUM)),
    ],
    "slack_bot": [
        _one("SLACK_BOT_TOKEN={}", lambda g: "xo" + "xb-" + g.digits(12) + "-" + g.digits(13) + "-" + g.s(24)),
        _one("client = WebClient('{}')", lambda g: "xo" + "xb-" + g.digits(11) + "-" + g.digits(13) + "-" + g.s(24)),
    ],
    "slack_user": [
        _one("{}", lambda g: "xo" + "xp-" + g.digits(11) + "-" + g.digits(11) + "-" + g.digits(12) + "-" + g.s(32, HEX)),
        _one("app token {}", lambda g: "xa" + "pp-1-A" + g.digits(10) + "-" + g.digits(13) + "-" + g.s(64, HEX)),
    ],
    "slack_webhook": [
        _one("curl -X POST {} -d @msg.json", lambda g: "https://hooks.slack.com/services/T" + g.s(8, string.ascii_uppercase + string.digits) + "/B" + g.s(10, string.ascii_uppercase + string.digits) + "/" + g.s(24)),
    ],
    "stripe_live": [
        _one("STRIPE_SECRET_KEY={}", lambda g: SK + "_live_" + g.s(24)),
        _one('stripe.api_key = "{}"', lambda g: SK + "_live_" + g.s(99)),
        _one("charged with {}", lambda g: SK + "_live_" + g.s(24)),
    ],
    "stripe_test": [
        _one("{}", lambda g: SK + "_test_" + g.s(24)),
        _one("STRIPE_KEY: {}", lambda g: SK + "_test_" + g.s(99)),
    ],
    "stripe_restricted": [
        _one("restricted key {}", lambda g: "rk" + "_live_" + g.s(24)),
        _one("whsec {}", lambda g: "wh" + "sec_" + g.s(32)),
    ],
    "openai_legacy": [
        _one("OPENAI_API_KEY={}", lambda g: SK + "-" + g.s(20) + "T3Blb" + "kFJ" + g.s(20)),
        _one("openai.api_key = '{}'", lambda g: SK + "-" + g.s(48)),
    ],
    "openai_project": [
        _one("OPENAI_API_KEY={}", lambda g: SK + "-proj-" + g.s(74, URLSAFE) + "T3Blb" + "kFJ" + g.s(74, URLSAFE)),
        _one("use {} for the eval run", lambda g: SK + "-proj-" + g.s(156, URLSAFE)),
        _one("{}", lambda g: SK + "-svcacct-" + g.s(60, URLSAFE)),
    ],
    "anthropic": [
        _one("ANTHROPIC_API_KEY={}", lambda g: SK + "-ant-" + "api03-" + g.s(93, URLSAFE) + "AA"),
        _one("x-api-key: {}", lambda g: SK + "-ant-" + "api03-" + g.s(93, URLSAFE) + "AA"),
        _one("admin {}", lambda g: SK + "-ant-" + "admin01-" + g.s(93, URLSAFE) + "AA"),
    ],
    "google_api_key": [
        _one("https://maps.googleapis.com/maps/api/geocode/json?address=x&key={}", lambda g: "AI" + "za" + g.s(35, URLSAFE)),
        _one("GOOGLE_API_KEY={}", lambda g: "AI" + "za" + g.s(35, URLSAFE)),
        _one('apiKey: "{}",', lambda g: "AI" + "za" + g.s(35, URLSAFE)),
    ],
    "google_oauth": [
        _one('"client_secret": "{}"', lambda g: "GOC" + "SPX-" + g.s(28, URLSAFE)),
        _one("access token {}", lambda g: "ya" + "29." + g.s(150, URLSAFE)),
        _one('"refresh_token": "{}"', lambda g: "1//0" + g.s(100, URLSAFE)),
    ],
    "huggingface": [
        _one("huggingface-cli whoami -> token `{}` valid", lambda g: "h" + "f_" + g.s(34, string.ascii_letters)),
        _one("git clone https://user:{}@huggingface.co/acme/model", lambda g: "h" + "f_" + g.s(34, string.ascii_letters)),
        _one("login(token=\"{}\")", lambda g: "h" + "f_" + g.s(37, ALNUM)),
        _one("HF_TOKEN={}", lambda g: "h" + "f_" + g.s(34, string.ascii_letters)),
        _one("huggingface-cli login --token {}", lambda g: "h" + "f_" + g.s(34, string.ascii_letters)),
        _one("I used {} to download the model", lambda g: "h" + "f_" + g.s(34, ALNUM)),
        _one("{}", lambda g: "api" + "_org_" + g.s(34, string.ascii_letters)),
    ],
    "npm": [
        _one("//registry.npmjs.org/:_authToken={}", lambda g: "np" + "m_" + g.s(36)),
        _one("NPM_TOKEN={}", lambda g: "np" + "m_" + g.s(36)),
        _one("publish with {}", lambda g: "np" + "m_" + g.s(36)),
    ],
    "pypi": [
        _one("password = {}", lambda g: "py" + "pi-" + "AgEIcHlwaS5vcmc" + g.s(140, URLSAFE)),
        _one("TWINE_PASSWORD={}", lambda g: "py" + "pi-" + "AgENdGVzdC5weXBpLm9yZw" + g.s(140, URLSAFE)),
        _one("uv publish --token {}", lambda g: "py" + "pi-" + "AgEIcHlwaS5vcmc" + g.s(140, URLSAFE)),
    ],
    "twilio": [
        _one("TWILIO_API_KEY={}", lambda g: "S" + "K" + g.s(32, HEX)),
        _one("account {} auth", lambda g: "A" + "C" + g.s(32, HEX)),
        _one("TWILIO_AUTH_TOKEN={}", lambda g: g.s(32, HEX)),
    ],
    "sendgrid": [
        _one("SENDGRID_API_KEY={}", lambda g: "S" + "G." + g.s(22, URLSAFE) + "." + g.s(43, URLSAFE)),
        _one("{}", lambda g: "S" + "G." + g.s(22, URLSAFE) + "." + g.s(43, URLSAFE)),
    ],
    "mailgun": [
        _one("MAILGUN_API_KEY={}", lambda g: "key-" + g.s(32, HEX)),
        _one("curl -s --user 'api:{}' https://api.mailgun.net/v3/x/messages", lambda g: "key-" + g.s(32, HEX)),
        _one("mailgun {}", lambda g: g.s(32, HEX) + "-" + g.s(8, HEX) + "-" + g.s(8, HEX)),
    ],
    "discord": [
        _one("DISCORD_TOKEN={}", _discord),
        _one("client.run('{}')", _discord),
        _one("{}", lambda g: "https://discord.com/api/webhooks/" + g.digits(18) + "/" + g.s(68, URLSAFE)),
    ],
    "telegram": [
        _one("TELEGRAM_BOT_TOKEN={}", lambda g: g.digits(10) + ":AA" + g.s(33, URLSAFE)),
        _one("https://api.telegram.org/bot{}/getMe", lambda g: g.digits(9) + ":AA" + g.s(33, URLSAFE)),
    ],
    "jwt": [
        _one("{}", _jwt),
        _one('{{"access_token": "{}", "expires_in": 3600}}', _jwt),
        _one("Cookie: session={}", _jwt),
    ],
    "pem_private_key": [
        _pem_t("RSA " + "PRIVATE" + " KEY"),
        _pem_t("PRIVATE" + " KEY", '{{"type": "service_account", "private_key": {}}}'),
        _pem_t("EC " + "PRIVATE" + " KEY", "key.pem:\n{}\n"),
    ],
    "ssh_private_key": [
        _pem_t("OPENSSH " + "PRIVATE" + " KEY", "$ cat ~/.ssh/id_ed25519\n{}"),
        _pem_t("DSA " + "PRIVATE" + " KEY"),
    ],
    "azure_storage": [
        _one("DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={};EndpointSuffix=core.windows.net", lambda g: g.s(86, B64) + "=="),
        _one("AZURE_STORAGE_KEY={}", lambda g: g.s(86, B64) + "=="),
        _one("https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&sp=r&sig={}", lambda g: g.s(43, ALNUM) + "%3D"),
    ],
    "azure_client_secret": [
        _one("AZURE_CLIENT_SECRET={}", lambda g: g.s(3) + g.digits(1) + "Q~" + g.s(31, URLSAFE + ".~")),
        _one('"clientSecret": "{}"', lambda g: g.s(3) + g.digits(1) + "Q~" + g.s(31, URLSAFE + ".~")),
    ],
    "db_url": [
        _one("DATABASE_URL=postgres://app:{}@db.internal:5432/app", lambda g: g.s(20)),
        _one("mysql://root:{}@127.0.0.1:3306/shop", lambda g: g.password()),
        _one("mongodb+srv://admin:{}@cluster0.x1y2z.mongodb.net/prod?retryWrites=true", lambda g: g.s(16)),
        _one("REDIS_URL=redis://:{}@cache:6379/0", lambda g: g.s(24)),
        _one("amqp://guest:{}@rabbit:5672/", lambda g: g.password()),
    ],
    "basic_auth": [
        _one("Authorization: Basic {}", lambda g: base64.b64encode(b"admin:" + g.s(14).encode()).decode()),
        _one("git remote add origin https://deploy:{}@git.acme.io/web.git", lambda g: g.s(18)),
        _one("pip install --index-url https://ci:{}@pypi.acme.io/simple pkg", lambda g: g.password()),
    ],
    "bearer": [
        _one("Authorization: Bearer {}", lambda g: g.s(40, URLSAFE + ".~")),
        _one("curl -H 'Authorization: Bearer {}' https://api.acme.io/v1/me", lambda g: g.s(64, ALNUM)),
        _one('headers = {{"Authorization": "Bearer {}"}}', lambda g: g.s(32)),
    ],
    "env_assignment": [
        _one("SECRET_KEY={}", lambda g: g.pick(["=", "&", "%", "!", "@", "#", "*"]) + g.s(40, ALNUM + "!@#%^&*-_=+")),
        _one("AZURE_STORAGE_KEY={}", lambda g: "/" + g.s(85, B64) + "=="),
        _one("django SECRET_KEY = '{}'", lambda g: "django-insecure-" + g.s(50, string.ascii_lowercase + string.digits + "!@#$%^&*(-_=+)")),
        _one("SECRET_KEY='{}'", lambda g: "django-insecure-" + g.s(50, string.ascii_lowercase + string.digits + "!@#$%^&*(-_=+)")),
        _one('PASSPHRASE="{}"', lambda g: g.password().replace("&", " w0rd ")),
        _one("DB_PASSWORD={} ./run.sh", lambda g: g.password()),
        _one("mail.password={}", lambda g: g.password()),
        _one("<password>{}</password>", lambda g: g.password()),
        _one("spring.datasource.password: {}", lambda g: g.password()),
        _one("ansible_become_pass: {}", lambda g: g.password()),
        _one("-H 'X-API-Key: {}'", lambda g: g.s(32)),
        _one("Private-Token: {}", lambda g: g.s(20, ALNUM)),
        _one("api_key: '{}'", lambda g: g.s(24, HEX)),
        _one("SECRET_KEY={}", lambda g: g.s(50, ALNUM + "!@#%^&*-_=+")),
        _one("PASSWORD={}", lambda g: g.password()),
        _one("password: {}", lambda g: g.password()),
        _one('DB_PASS="{}"', lambda g: g.password()),
        _one("export API_TOKEN={}", lambda g: g.s(32)),
        _one("JWT_SECRET={}", lambda g: g.s(12, ALNUM + "&%#!$@") + "&3"),
        _one("smtp_password = {}", lambda g: g.password()),
    ],
    "prose_password": [
        _one("Here's the password: {}", lambda g: g.password()),
        _one("new password => {}", lambda g: g.password()),
        _one("the wifi password is '{}'", lambda g: g.s(10, string.ascii_lowercase)),
        _one("Kennwort: {}", lambda g: g.password()),
        _one("a senha é {}", lambda g: g.password()),
        _one("la password è {}", lambda g: g.password()),
        _one("het wachtwoord is {}", lambda g: g.password()),
        _one("пароль: {}", lambda g: g.password()),
        _one("数据库密码是 {}", lambda g: g.password()),
        _one("passwd: {}", lambda g: g.password()),
        _one("the secret is {} (don't share)", lambda g: g.password()),
        _one("user/pass: deploy / {}", lambda g: g.password()),
        _one("the db password is {}", lambda g: g.password()),
        _one("my login password is {} btw", lambda g: g.password()),
        _one("pw: {}", lambda g: g.password()),
        _one("The admin password for staging is {}.", lambda g: g.password()),
        _one("use password {} for the vpn", lambda g: g.password()),
        _one("I changed the root password to {}", lambda g: g.password()),
        _one("das Passwort ist {}", lambda g: g.password()),
        _one("le mot de passe est {}", lambda g: g.password()),
        _one("la contraseña es {}", lambda g: g.password()),
        _one("credentials: admin / {}", lambda g: g.password()),
    ],
    "cli_password": [
        _cli("mysqladmin -uroot -p{} status"),
        _cli("sshpass -p{} ssh root@10.0.0.9"),
        _cli("curl --user ci:{} https://nexus.acme.io/repository"),
        _cli("MYSQL_PWD={} mysql -u app"),
        _cli("redis-cli --pass {} info"),
        _cli("openssl pkcs12 -export -in c.pem -out c.p12 -passout pass:{}"),
        _cli("keytool -importkeystore -srckeystore a.jks -srcstorepass {} -deststorepass x9"),
        _cli("htpasswd -b /etc/nginx/.htpasswd admin {}"),
        _cli("mongosh -u admin -p {} --authenticationDatabase admin"),
        _cli("sqlcmd -S db -U sa -P {} -Q 'select 1'"),
        _cli("echo '{}' | sudo -S apt-get update"),
        _cli("echo {} | docker login -u ci --password-stdin"),
        _cli("docker run -e POSTGRES_PASSWORD={} postgres:16"),
        _cli("kubectl create secret generic db --from-literal=password={}"),
        _cli("xfreerdp /u:admin /p:{} /v:10.0.0.4"),
        _cli("smbclient //fs/share -U admin%{}"),
        _cli("ldapsearch -x -D cn=admin,dc=acme -w {} -b dc=acme"),
        _cli("zip -P {} backup.zip db.sql"),
        _cli("git clone https://deploy:{}@git.acme.io/app.git"),
        _cli("psql 'host=db user=app password={} dbname=app'"),
        _cli("mysql -u root -p{} shop"),
        _cli("mysqldump -uroot -p'{}' shop > dump.sql"),
        _cli("sshpass -p '{}' ssh deploy@10.0.0.5"),
        _cli("sshpass -p {} scp app.tar deploy@host:/srv"),
        _cli("curl -u admin:{} https://ci.acme.io/api/json"),
        _cli("mysql --password={} -h db"),
        _cli("PGPASSWORD={} psql -h db -U app"),
        _cli("redis-cli -h cache -a {} ping"),
        _cli("docker login -u ci -p {} registry.acme.io"),
        _cli("wget --user=ci --password={} https://files.acme.io/a.zip"),
    ],
    "split_key": [
        _split("export AWS_SECRET_ACCESS_KEY={}", lambda g: g.s(40, B64)),
        _split("Authorization: Bearer {}", lambda g: g.s(80, URLSAFE)),
        _split("my hf token is {}", lambda g: "h" + "f_" + g.s(34, string.ascii_letters)),
        _split("{}", lambda g: "gl" + "pat-" + g.s(20, ALNUM) + g.s(20, ALNUM)),
        _split("OPENAI_API_KEY={}", lambda g: SK + "-proj-" + g.s(120, URLSAFE)),
        _split("API_KEY={}", lambda g: g.s(48)),
        _split('"token": "{}"', lambda g: _github(g, "gh" + "p_")),
        _split("here is the key:\n{}", lambda g: SK + "-ant-" + "api03-" + g.s(93, URLSAFE) + "AA"),
    ],
    "bare_base64": [
        _one("| prod | {} |", lambda g: g.s(40)),
        _one('{{"value": "{}"}}', lambda g: g.s(48, URLSAFE)),
        _one("openssl rand -base64 32 -> {}", lambda g: g.s(43, B64) + "="),
        _one("python -c 'import secrets; print(secrets.token_urlsafe(32))' -> {}", lambda g: g.s(43, URLSAFE)),
        _one("Cookie: sid={}", lambda g: g.s(48)),
        _one("`{}`", lambda g: g.s(36)),
        _one("{}", lambda g: g.s(40)),
        _one("Set it to {} and restart.", lambda g: g.s(32)),
        _one("value: {}", lambda g: g.s(44, B64) + "="),
        _one("--> {}", lambda g: g.s(64, URLSAFE)),
    ],
    "bare_hex": [
        _one("bash head -c 32 /dev/urandom | xxd -p -c 64 -> {}", lambda g: g.s(64, HEX)),
        _one("The new value is {}.", lambda g: g.s(40, HEX)),
        _one("X-Webhook-Signing: {}", lambda g: g.s(48, HEX)),
        _one("{}", lambda g: g.s(32, HEX.upper())),
        _one("openssl rand -hex 32 -> {}", lambda g: g.s(64, HEX)),
        _one("python -c 'import secrets; print(secrets.token_hex(24))' -> {}", lambda g: g.s(48, HEX)),
        _one("use {} as the signing value", lambda g: g.s(64, HEX)),
    ],
    "vendor_prefixed": [
        _one("{}", lambda g: "shp" + "at_" + g.s(32, HEX)),
        _one("DIGITALOCEAN_TOKEN={}", lambda g: "do" + "p_v1_" + g.s(64, HEX)),
        _one("databricks {}", lambda g: "da" + "pi" + g.s(32, HEX)),
        _one("{}", lambda g: "lin" + "_api_" + g.s(40)),
        _one("NOTION_TOKEN={}", lambda g: "nt" + "n_" + g.digits(11) + g.s(35)),
        _one("{}", lambda g: "PM" + "AK-" + g.s(24, HEX) + "-" + g.s(34, HEX)),
        _one("VAULT_TOKEN={}", lambda g: "hv" + "s." + g.s(90, URLSAFE)),
        _one("{}", lambda g: "AGE-SECRET" + "-KEY-1" + g.s(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L")),
        _one("tailscale up --authkey {}", lambda g: "tskey" + "-auth-" + g.s(12) + "-" + g.s(30)),
        _one("{}", lambda g: "gl" + "sa_" + g.s(32) + "_" + g.s(8, HEX)),
        _one("DOPPLER_TOKEN={}", lambda g: "dp" + ".pt." + g.s(43)),
        _one("{}", lambda g: "r" + "8_" + g.s(37)),
        _one("{}", lambda g: "sb" + "p_" + g.s(40, HEX)),
        _one("{}", lambda g: "NR" + "AK-" + g.s(27, string.ascii_uppercase + string.digits)),
        _one("{}", lambda g: "sq0" + "atp-" + g.s(22, URLSAFE)),
        _one("{}", lambda g: "pu" + "l-" + g.s(40, HEX)),
        _one("{}", lambda g: "xa" + "i-" + g.s(80)),
        _one("{}", lambda g: "pp" + "lx-" + g.s(48)),
        _one("{}", lambda g: "gs" + "k_" + g.s(52)),
        _one("LANGSMITH_API_KEY={}", lambda g: "ls" + "v2_pt_" + g.s(32, HEX) + "_" + g.s(10, HEX)),
        _one("{}", lambda g: SK + "-" + g.s(32, HEX)),
        _one("{}", lambda g: "ATA" + "TT3xFfGF0" + g.s(170, URLSAFE) + "=" + g.s(8, HEX)),
    ],
}
# fmt: on

# Realistic surroundings per role; "{s}" is the snippet. Tool lines look like transcript
# tool lines (tool, key input, "->", output).
ROLE_CONTEXTS: dict[str, list[str]] = {
    "user": [
        "{s}",
        "can you check why this fails?\n{s}\nit worked yesterday",
        "here's what I have in my config: {s} -- please wire it into the deploy script",
        "Remember this for later:\n{s}",
    ],
    "assistant": [
        "I've updated the configuration:\n\n```\n{s}\n```\n\nRestart the service to apply it.",
        "Done. {s}\nLet me know if you want me to rotate it.",
        "The failing call used the following setting: {s}. I replaced it in `app/settings.py`.",
    ],
    "tool": [
        "bash cat .env -> {s}",
        "read /srv/app/config/production.yml -> {s}",
        "bash kubectl logs deploy/api | tail -n 5 (exit 1) -> error: {s} rejected",
        "grep -rn SECRET . -> ./deploy/run.sh:12: {s}",
    ],
}


def build_cases(per_template: int = 1, seed: int = SEED) -> list[Case]:
    """Every template of every kind in every role context (``per_template`` secrets each).

    Each case gets a fresh secret; contexts are picked round-robin so every context is
    used. Deterministic for a given ``seed``.
    """
    g = Gen(seed)
    cases: list[Case] = []
    turn = 0
    for kind, templates in KINDS.items():
        for template in templates:
            for role, contexts in ROLE_CONTEXTS.items():
                for _ in range(per_template):
                    snippet, secrets = template(g)
                    ctx = contexts[turn % len(contexts)]
                    turn += 1
                    cases.append(Case(kind, role, ctx.replace("{s}", snippet), secrets))
    return cases


CASES: list[Case] = build_cases()

"""The rule table: every rule :func:`~opencode_memoryd.redaction.engine.redact` runs.

Two tables joined: the token shapes (:data:`~opencode_memoryd.redaction.tokens.TOKEN_ROWS`)
and the context rules below, which find a secret by what surrounds it: URLs with
passwords, ``Authorization`` headers, command-line flags (:data:`CLI_FLAGS`), passwords in
prose (:data:`PROSE_KEYS`, :data:`PROSE_VERBS`), assignments, high-entropy strings after a
key word, and bare high-entropy strings. Regex rules are :class:`RegexRule` rows; rules
that need code are :class:`~opencode_memoryd.redaction.scan.Rule` rows whose finder lives
in :mod:`~opencode_memoryd.redaction.finders`, :mod:`~opencode_memoryd.redaction.cli`,
:mod:`~opencode_memoryd.redaction.prose` or :mod:`~opencode_memoryd.redaction.bare`. The
order of the rows does not change the output: overlaps are settled by priority, then
length.

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

from opencode_memoryd.redaction.bare import find_bare
from opencode_memoryd.redaction.catalog import find_catalog
from opencode_memoryd.redaction.cli import CliFlag, cli_rule, find_cli
from opencode_memoryd.redaction.finders import (
    find_assignments,
    find_auth_header,
    find_bearer,
    find_high_entropy,
)
from opencode_memoryd.redaction.heuristics import tag_value_ok
from opencode_memoryd.redaction.prose import prose_finder
from opencode_memoryd.redaction.scan import (
    P_ASSIGN,
    P_BARE,
    P_ENTROPY,
    P_HEADER,
    P_PROSE,
    P_PROVIDER,
    P_URL,
    NoCase,
    Rule,
)
from opencode_memoryd.redaction.tokens import (
    TOKEN_ROWS,
    RegexRule,
    compile_rule,
    url_password_ok,
)

#: Short flags that take a password in the commands named (see :class:`CliFlag`).
CLI_FLAGS: tuple[CliFlag, ...] = (
    CliFlag(("mysql", "mariadb"), "-p", attached=True, strict=True),  # also mysqldump …
    CliFlag(("sshpass",), "-p", attached=True),
    CliFlag(("login",), "-p"),  # docker/podman/helm/oras/az login -p
    CliFlag(("redis-cli", "keydb-cli", "valkey-cli"), "-a"),
    CliFlag(("mongo",), "-p", strict=True),  # mongo, mongosh, mongodump
    CliFlag(("zip", "7z", "rar"), "-P"),  # zip -P, unzip -P
    CliFlag(("7z", "rar"), "-p", attached=True, spaced=False),  # 7z a -pSECRET
    CliFlag(("sqlcmd", "bcp", "osql", "ipmitool"), "-P", attached=True),
    CliFlag(("ldap",), "-w"),  # ldapsearch, ldapadd, ldapmodify
    CliFlag(("smbclient", "rpcclient"), r"-U[ \t]*[\"']?[^\s%\"']+%", attached=True,
            spaced=False),
    CliFlag(("xfreerdp", "rdp"), "/p:", attached=True, spaced=False),
    CliFlag(("htpasswd",), r"-[a-zA-Z]*b[a-zA-Z]*[ \t]+\S+[ \t]+\S+"),  # -b file user pw
    CliFlag(("net user", "net  user"), r"net[ \t]+user[ \t]+\S+", strict=True),
    CliFlag(("redis", "6379>"), "AUTH", strict=True),  # redis> AUTH secret
)

#: Key words that introduce a password in prose, in several languages ("the db password
#: is …", "das Passwort ist …", "la contraseña es …").
PROSE_KEYS: tuple[str, ...] = (
    "password", "passwd", "passphrase", "passcode", "pwd", "pw", "pass", "passwort",
    "kennwort", "mot de passe", "contraseña", "contrasena", "clave", "senha", "wachtwoord",
    "hasło", "haslo", "пароль", "密码", "密碼", "パスワード", "비밀번호", "şifre", "sifre",
    "parola", "heslo", "salasana", "lösenord", "losenord", "adgangskode", "passord",
    "jelszó", "jelszo", "κωδικός",
    # inflected and possessive forms: Swedish, Danish and Norwegian definite ("lösenordet",
    # "adgangskoden", "passordet"), Turkish "my/its password" ("şifrem", "şifresi",
    # "parolam"), Finnish "my password" ("salasanani"), Polish and Russian cases.
    "lösenordet", "losenordet", "adgangskoden", "kodeord", "kodeordet", "passordet",
    "şifrem", "şifresi", "şifreyi", "şifreniz", "sifrem", "sifresi", "parolam", "parolas\u0131",
    "salasanani", "salasanan", "hasła", "hasłem", "пароля", "паролем", "mdp",
)
#: Keys of languages with no copula, or whose possessive is the statement ("мой пароль X",
#: "şifrem X"): a value may follow them directly (see :func:`prose_finder`).
PROSE_BARE_KEYS: tuple[str, ...] = (
    "пароль", "пароля", "şifrem", "şifresi", "şifreyi", "şifreniz", "sifrem", "sifresi",
    "parolam", "parolas\u0131", "şifre", "sifre", "parola",
)
#: Keys of a ``user<sep>password`` pair ("credentials: admin / …", "login admin / …").
PROSE_PAIR_KEYS: tuple[str, ...] = ("credentials", "creds", "login", "user/pass",
                                    "username/password", "login/password")
#: Other secrets stated in prose ("the api key is …", "my token: …").
PROSE_SECRET_KEYS: tuple[str, ...] = (
    "secret", "api key", "apikey", "api token", "access key", "secret key", "token",
    "access token", "auth token", "passkey", "client secret",
)
#: Keys too short to take a value without a verb ("pw X" is not a statement).
PROSE_WEAK_KEYS: tuple[str, ...] = ("pw", "pass", "pwd")
# ("mdp", the French "mot de passe", takes a verb or a sign; its value needs a letter:
# "MDP: 0.95" is a Markov decision process.)
#: Where prose keys start: every key starts with one of these (see :func:`prose_finder`).
PROSE_SEEDS: tuple[str, ...] = (
    "pass", "pw", "kennwort", "contrase", "clave", "senha", "wachtwoord", "hasło", "haslo",
    "пароль", "密码", "密碼", "パスワード", "비밀번호", "şifre", "sifre", "parola", "heslo",
    "salasana", "lösenord", "losenord", "adgangskode", "jelsz", "κωδικός", "mot de passe",
    "kodeord", "mdp", "hasł", "парол",
    "cred", "login", "user/pass", "username/password", "login/password", "secret", "token",
    "api key", "apikey", "api token", "access key", "access token", "auth token",
    "client secret",
)
assert all(k.startswith(PROSE_SEEDS)
           for k in (*PROSE_KEYS, *PROSE_PAIR_KEYS, *PROSE_SECRET_KEYS))

#: What stands between key and value (U+FF1A is the full-width colon, U+2014 and U+2013
#: the em and en dashes).
PROSE_VERBS: tuple[str, ...] = (
    ":=", "=>", "->", "=", ":", "\uff1a", "\u2014", "\u2013", "is", "is now", "is still",
    "is set to", "is just", "was", "are", "set to", "changed to", "reset to", "to", "will be",
    "should be", "ist", "lautet", "war", "est", "était", "es", "era", "é", "è", "er",
    "var", "je", "jest", "är", "on", "是", "为", "為", "は", "が", "는", "은", "이",
    # "changed to X" in other languages: "veranderd in", "auf … geändert", "cambié … a",
    # "mudei … para", "поменял … на", "zmieniłem … na", "bytte … till", "を … に変更",
    # "를 … 로", "改成了" (the prepositions count right after the key only: see prose.py).
    "veranderd in", "gewijzigd in", "auf", "a", "para", "на", "na", "till", "を", "를", "을",
    "改成了", "改成", "改为", "设为", "设置为", "это",
)

_CONTEXT_ROWS: tuple[RegexRule | Rule, ...] = (
    # Every token shape of the maintained catalogue (see catalog.py); it reports kinds.
    Rule("token", P_PROVIDER, find_catalog),
    # scheme://user:password@host, the password possibly holding any of !#$&*+,;=@ and
    # %-escapes (the detect-secrets rule stops at them); it runs to the last "@" before
    # the host.
    RegexRule("url_password",
              r"://[^\s:/@\"'`<>]*:(?P<v>[^\s/\"'`<>]+)@(?=[A-Za-z0-9[])",
              ("://",), priority=P_URL, group="v", check=url_password_ok),
    RegexRule("url_password", r"://:(?P<v>[^\s/@:?#\"'`]+)@", ("://:",), priority=P_URL,
              group="v", check=url_password_ok),
    Rule("bearer_token", P_HEADER, find_bearer, ("bearer",), hints_nocase=True),
    Rule("bearer_token", P_HEADER, find_auth_header("bearer_token"), ("authorization",),
         hints_nocase=True),
    Rule("basic_auth", P_HEADER, find_auth_header("basic_auth"), ("authorization",),
         hints_nocase=True),
    Rule("password", P_HEADER, find_cli, ("-", "machine", "echo")),
    # <password>…</password>, <add key="ApiToken" …> is the assignment rule's.
    RegexRule("password",
              NoCase(r"<(?P<name>[a-z0-9_:.-]*(?:password|passwd|pwd|passphrase|secret|token|"
                     r"api[_-]?key|private[_-]?key))>(?P<v>[^<\s][^<\n]{0,200}?)</"),
              ("pass", "pwd", "secret", "token", "key>"), nocase=True, group="v",
              priority=P_ASSIGN, check=tag_value_ok),
    *(cli_rule(row) for row in CLI_FLAGS),
    Rule("password", P_PROSE, prose_finder(PROSE_KEYS, PROSE_VERBS, PROSE_PAIR_KEYS,
                                            PROSE_WEAK_KEYS, PROSE_SECRET_KEYS, PROSE_SEEDS,
                                            PROSE_BARE_KEYS),
         PROSE_SEEDS, hints_nocase=True),
    # Reports password / secret / token / api_key / private_key by the assigned name.
    Rule("password", P_ASSIGN, find_assignments, ("pass", "pwd", "secret", "token", "key"),
         hints_nocase=True),
    Rule("high_entropy", P_ENTROPY, find_high_entropy,
         ("key", "secret", "token", "pass", "pwd", "cred", "auth", "api"), hints_nocase=True),
    Rule("high_entropy", P_BARE, find_bare),
)

#: Every rule, compiled: the token rows, then the context rows.
RULES: tuple[Rule, ...] = tuple(
    compile_rule(row) if isinstance(row, RegexRule) else row
    for row in (*TOKEN_ROWS, *_CONTEXT_ROWS)
)

"""Passwords on command lines: ``mysql -p…``, ``sshpass -p …``, ``curl -u user:pass``, flags.

* :class:`CliFlag` rows (the table is :data:`~opencode_memoryd.redaction.rules.CLI_FLAGS`)
  describe a short flag that takes a password in some commands: ``-p`` of ``mysql`` and
  ``sshpass``, ``-a`` of ``redis-cli``, ``-P`` of ``zip`` …; :func:`cli_rule` compiles one
  row into a rule that runs only on the lines naming one of its commands.
* :func:`find_cli` finds ``curl -u user:pass`` (also ``-uuser:pass`` and ``--user=``),
  ``.netrc`` lines, and long flags whose name ends in a secret word (``--password X``,
  ``--db-password=X``, ``--api-key X``, ``-passin pass:X``) in any command.

Internal to :mod:`opencode_memoryd.redaction`; other code imports
:mod:`opencode_memoryd.redaction.engine`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from opencode_memoryd.redaction.heuristics import (
    is_placeholder,
    looks_like_path,
    looks_like_reference,
    password_like,
    random_looking,
    word_start,
)
from opencode_memoryd.redaction.scan import P_HEADER, Rule, ScanText

#: A flag's value: double-quoted, single-quoted or up to the next blank.
_VALUE = r"(?:\"(?P<dq>[^\"\n]{1,200})\"|'(?P<sq>[^'\n]{1,200})'|(?P<v>[^\s\"'`]{1,200}))"
_VALUE_GROUPS = ("dq", "sq", "v")


@dataclass(frozen=True)
class CliFlag:
    """A command-line flag that takes a password, as data.

    Attributes:
        commands: lower-case words (command names); the rule looks only at the 300
            characters after one of them.
        flag: regex source of the flag, case-sensitive (``-p``, ``-P``, ``-w``); it must
            stand at the start of an argument.
        attached: the value may follow the flag directly (``-pSECRET``).
        spaced: the value may follow after blanks (``-p SECRET``).
        strict: a spaced value must look like a password (``mysql -p dbname`` prompts
            and ``dbname`` is no password).
    """

    commands: tuple[str, ...]
    flag: str
    attached: bool = False
    spaced: bool = True
    strict: bool = False


def _cli_value_ok(value: str) -> bool:
    if len(value) < 3 or is_placeholder(value) or value.startswith(("-", "$", "`")):
        return False
    return not looks_like_path(value) and "$(" not in value


def cli_rule(row: CliFlag, kind: str = "password") -> Rule:
    """The :class:`Rule` of one :class:`CliFlag` row.

    Its regexes run only within 300 characters after each command word
    (:meth:`~opencode_memoryd.redaction.scan.ScanText.windows`) and start with the flag
    itself; the character before the flag is checked apart (not a word character or
    ``-``).
    """

    def strict_ok(value: str) -> bool:
        return _cli_value_ok(value) and password_like(value)

    ways: list[tuple[re.Pattern[str], Callable[[str], bool]]] = []
    if row.attached:
        ways.append((re.compile(rf"(?:{row.flag})(?=[^\s-]){_VALUE}"), _cli_value_ok))
    if row.spaced:
        ways.append((re.compile(rf"(?:{row.flag})[ \t]+{_VALUE}"),
                     strict_ok if row.strict else _cli_value_ok))

    def find(src: ScanText) -> Iterator[tuple[int, int]]:
        text = src.text
        for start, end in src.windows(row.commands, 0, 300):
            for pattern, check in ways:
                for m in pattern.finditer(text, start, end):
                    i = m.start()
                    if i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_-"):
                        continue
                    g = next(g for g in _VALUE_GROUPS if m.start(g) >= 0)
                    if check(m.group(g)):
                        yield m.span(g)

    return Rule(kind, P_HEADER, find, row.commands, hints_nocase=True)


_CURL_USER_RE = re.compile(
    r"-(?:u|-user)(?:[ \t]+|=|(?=[^\s\"'-]))[\"']?[^\s:\"'-][^\s:\"']{0,100}:(?P<v>[^\s\"']+)"
)
_LFTP_USER_RE = re.compile(r"-u[ \t]+[\"']?[^\s,\"'-][^\s,\"']{0,100},(?P<v>[^\s\"']+)")
#: ``echo <password> | sudo -S …`` (or ``docker login --password-stdin``, ``chpasswd``).
_ECHO_PIPE_RE = re.compile(
    r"(?<![\w-])echo[ \t]+(?:-[ne]+[ \t]+)?" + _VALUE.replace("[^\\s\\\"'`]", "[^\\s\\\"'`|]")
    + r"[ \t]*\|[ \t]*(?:sudo\b[^|\n]*[ \t]-S\b|[^|\n]*--password-stdin|chpasswd|"
    r"passwd\b[^|\n]*--stdin)"
)
_NETRC_RE = re.compile(r"machine[ \t]+\S+(?:[ \t]+login[ \t]+\S+)?[ \t]+password[ \t]+(?P<v>\S+)")
#: A flag whose name ends in a secret word (lower case; the character before is checked
#: apart, so that the regex starts with a literal "-" and ``re`` jumps between dashes).
_LONG_FLAG_RE = re.compile(
    r"--?(?P<name>(?:[a-z0-9]{1,30}-){0,4}+[a-z]*(?:password|passwd|pass|passphrase|pwd|token|"
    r"secret|apikey|key|bearer|requirepass|masterauth|storepass|keypass))(?![a-z0-9_-])"
    r"(?:=|[ \t]+)(?:pass:)?" + _VALUE
)
#: Names the flag must end with (``--db-password``, ``--api-key``, ``-srcstorepass``).
_FLAG_NAMES = ("password", "passwd", "-pass", "passphrase", "pwd", "token", "secret",
               "api-key", "apikey", "access-key", "secret-key", "private-key",
               "oauth2-bearer", "requirepass", "masterauth", "storepass", "keypass")
_LONG_FLAG_IC = re.compile(_LONG_FLAG_RE.pattern, re.IGNORECASE)
_PASSWORD_NAMES = ("pass", "passwd", "password", "passphrase", "pwd", "storepass", "keypass",
                   "requirepass", "masterauth")


def _value_span(m: re.Match[str]) -> tuple[int, int]:
    """The span of the value group that took part in a :data:`_VALUE` match."""
    return m.span(next(g for g in _VALUE_GROUPS if m.start(g) >= 0))


def _find_users(src: ScanText) -> Iterator[tuple[int, int]]:
    """``curl -u user:pass``, ``lftp -u user,pass``, ``.netrc`` and ``echo pw | sudo -S``."""
    text = src.text
    curl = ("-u" in text or "--user" in text) and _CURL_USER_RE.finditer(text)
    for m in curl or ():
        v = m.group("v")
        if word_start(text, m.start(), "-") and len(v) >= 3 and not is_placeholder(v):
            yield m.span("v")
    lftp = "lftp" in src.low and _LFTP_USER_RE.finditer(text)
    yield from (m.span("v") for m in lftp or () if not is_placeholder(m.group("v")))
    echo = "echo" in text and _ECHO_PIPE_RE.finditer(text)
    for m in echo or ():
        start, end = _value_span(m)
        if _cli_value_ok(text[start:end]) and password_like(text[start:end]):
            yield start, end
    for m in _NETRC_RE.finditer(text):
        if word_start(text, m.start()) and not is_placeholder(m.group("v")):
            yield m.span("v")


def _flag_value_ok(name: str, value: str, quoted: bool) -> bool:
    """Whether the value of long flag ``name`` (lower case) is a literal secret."""
    if not ("-" + name).endswith(_FLAG_NAMES):
        return False  # --key (a file), --bypass
    if not _cli_value_ok(value) or looks_like_reference(value):
        return False
    if value.startswith(("env:", "file:")):
        return False  # openssl -passin env:VAR
    if name.endswith(_PASSWORD_NAMES):
        return password_like(value) or random_looking(value, 6) or quoted
    return random_looking(value, 6)


def _find_long_flags(src: ScanText) -> Iterator[tuple[int, int]]:
    """``--password X``, ``--db-password=X``, ``--api-key X``, ``-passin pass:X`` …"""
    text = src.text
    low = src.low if src.aligned else text
    flags = _LONG_FLAG_RE.finditer(low) if src.aligned else _LONG_FLAG_IC.finditer(text)
    for m in flags:
        i = m.start()
        if i > 0 and (low[i - 1].isalnum() or low[i - 1] in "_-"):
            continue
        start, end = _value_span(m)
        name = low[m.start("name") : m.end("name")].lower()
        if _flag_value_ok(name, text[start:end], quoted=m.start("v") < 0):
            yield start, end


def find_cli(src: ScanText) -> Iterator[tuple[int, int]]:
    """``curl -u user:pass``, ``lftp -u user,pass``, ``echo pw | sudo -S``, ``.netrc`` lines
    and secret long flags."""
    yield from _find_users(src)
    yield from _find_long_flags(src)

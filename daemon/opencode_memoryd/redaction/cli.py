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
from collections.abc import Iterator
from dataclasses import dataclass

from opencode_memoryd.redaction.heuristics import (
    is_placeholder,
    looks_like_reference,
    password_like,
    random_looking,
    word_start,
)
from opencode_memoryd.redaction.scan import (
    P_HEADER,
    Found,
    NoCase,
    Rule,
    ScanText,
    regex_finder,
)

#: A flag's value: double-quoted, single-quoted or up to the next blank.
_VALUE = r"(?:\"(?P<dq>[^\"\n]{1,200})\"|'(?P<sq>[^'\n]{1,200})'|(?P<v>[^\s\"'`]{1,200}))"
_VALUE_GROUPS = ("dq", "sq", "v")


@dataclass(frozen=True)
class CliFlag:
    """A command-line flag that takes a password, as data.

    Attributes:
        commands: lower-case words (command names); the rule runs only on lines that
            hold one of them.
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
    return not value.startswith(("/", "./", "~/")) and "$(" not in value


def cli_rule(row: CliFlag, kind: str = "password") -> Rule:
    """The :class:`Rule` of one :class:`CliFlag` row (regexes gated on its commands)."""

    def strict_ok(value: str) -> bool:
        return _cli_value_ok(value) and password_like(value)

    finders = []
    if row.attached:
        attached = re.compile(rf"(?<![\w-])(?:{row.flag})(?=[^\s-]){_VALUE}")
        finders.append(regex_finder(attached, group=_VALUE_GROUPS, check=_cli_value_ok,
                                    gate=row.commands))
    if row.spaced:
        spaced = re.compile(rf"(?<![\w-])(?:{row.flag})[ \t]+{_VALUE}")
        finders.append(regex_finder(spaced, group=_VALUE_GROUPS, gate=row.commands,
                                    check=strict_ok if row.strict else _cli_value_ok))

    def find(src: ScanText) -> Iterator[Found]:
        for finder in finders:
            yield from finder(src)

    return Rule(kind, P_HEADER, find, row.commands, hints_nocase=True)


_CURL_USER_RE = re.compile(
    r"-(?:u|-user)(?:[ \t]+|=|(?=[^\s\"'-]))[\"']?[^\s:\"'-][^\s:\"']*:(?P<v>[^\s\"']+)"
)
_LFTP_USER_RE = re.compile(r"-u[ \t]+[\"']?[^\s,\"'-][^\s,\"']*,(?P<v>[^\s\"']+)")
#: ``echo <password> | sudo -S …`` (or ``docker login --password-stdin``, ``chpasswd``).
_ECHO_PIPE_RE = re.compile(
    r"(?<![\w-])echo[ \t]+(?:-[ne]+[ \t]+)?" + _VALUE.replace("[^\\s\\\"'`]", "[^\\s\\\"'`|]")
    + r"[ \t]*\|[ \t]*(?:sudo\b[^|\n]*[ \t]-S\b|[^|\n]*--password-stdin|chpasswd|"
    r"passwd\b[^|\n]*--stdin)"
)
_NETRC_RE = re.compile(r"machine[ \t]+\S+(?:[ \t]+login[ \t]+\S+)?[ \t]+password[ \t]+(?P<v>\S+)")
_LONG_FLAG_RE = NoCase(
    r"(?<![\w-])--?(?P<name>(?:[a-z0-9]+-)*(?:password|passwd|pass|passphrase|pwd|token|"
    r"secret|api-?key|access-?key|secret-?key|private-?key|auth-?token|client-?secret|"
    r"oauth2-bearer|requirepass|masterauth)|[a-z]*(?:storepass|keypass))(?![a-z0-9_-])"
    r"(?:=|[ \t]+)(?:pass:)?" + _VALUE
)
_PASSWORD_NAMES = ("pass", "passwd", "password", "passphrase", "pwd", "storepass", "keypass",
                   "requirepass", "masterauth")


def find_cli(src: ScanText) -> Iterator[tuple[int, int]]:
    """``curl -u user:pass``, ``lftp -u user,pass``, ``echo pw | sudo -S``, ``.netrc`` lines
    and secret long flags."""
    text = src.text
    for m in _CURL_USER_RE.finditer(text):
        v = m.group("v")
        if word_start(text, m.start(), "-") and len(v) >= 3 and not is_placeholder(v):
            yield m.span("v")
    if "lftp" in src.low:
        for m in _LFTP_USER_RE.finditer(text):
            if not is_placeholder(m.group("v")):
                yield m.span("v")
    if "echo" in text:
        for m in _ECHO_PIPE_RE.finditer(text):
            g = next(g for g in _VALUE_GROUPS if m.start(g) >= 0)
            v = m.group(g)
            if _cli_value_ok(v) and password_like(v):
                yield m.span(g)
    for m in _NETRC_RE.finditer(text):
        if word_start(text, m.start()) and not is_placeholder(m.group("v")):
            yield m.span("v")
    for m in _LONG_FLAG_RE.finditer(src):
        g = next(g for g in _VALUE_GROUPS if m.start(g) >= 0)
        start, end = m.span(g)
        v = text[start:end]
        if not _cli_value_ok(v) or looks_like_reference(v) or v.startswith(("env:", "file:")):
            continue
        name = src.low[m.start("name") : m.end("name")]
        if name.endswith(_PASSWORD_NAMES):
            ok = password_like(v) or random_looking(v, 6) or g != "v"
        else:
            ok = random_looking(v, 6)
        if ok:
            yield start, end

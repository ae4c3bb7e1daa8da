"""Secrets that only a session's other text gives away, and keys split across literals.

The corpus is the positive redaction corpus (``tests/redaction_corpus.py``): every secret
of one value is shown first in its setting (a key word before it) and then again bare, in
the settings a session repeats a value (a tool output, the assistant's reply, a later
turn); every provider token is split over string literals (``+`` of JavaScript, Python,
Java; PHP's ``.``; adjacent literals; template literals), a shell's line continuation and
a YAML block scalar. Each must be gone 100 %.
"""

from __future__ import annotations

import os
import random
import re

import pytest

from opencode_memoryd.redaction.engine import scrub, scrub_found
from opencode_memoryd.redaction.known import SessionSecrets, learnable
from redaction_corpus import CASES, Case
from redaction_kinds import TOKEN_KINDS

#: How a session shows a value again without its key word.
BARE = [
    "ok, I will use {v} from now on",
    "bash printenv | tail -1 -> {v}",
    "Set it to `{v}` and retry.",
    "the old one ({v}) is gone",
    "read deploy/notes.txt -> staging: {v}, prod: unchanged",
]

#: A key split in two (``{a}``, ``{b}``) or three (``{a}``, ``{b}``, ``{c}``) pieces.
SPLIT = {
    "python_plus": 'api_key = "{a}" + "{b}"',
    "python_implicit": 'API_KEY = (\n    "{a}"\n    "{b}"\n)',
    "js_multiline": "const key = '{a}' +\n  '{b}';",
    "shell_adjacent": "export SERVICE_TOKEN='{a}'\"{b}\"",
    "php_dot": '$key = "{a}" . "{b}";',
    "three_pieces": 'key = "{a}" + "{b}" + "{c}"',
    "template_literal": "const k = `{a}` + `{b}`",
    "shell_continuation": 'curl -H "X-Api-Key: {a}\\\n{b}" https://api.example.com/v1',
    "yaml_folded": "service:\n  api_key: >-\n    {a}\n    {b}\n",
}
_TOKEN = re.compile(r"(?!http)[A-Za-z0-9+/=_.-]{20,}")


def single_value_cases() -> list[Case]:
    return [c for c in CASES if len(c.secrets) == 1]


def test_a_value_redacted_once_is_redacted_bare_everywhere_in_the_session() -> None:
    """Learned from its first, key-worded appearance; the bare copies are redacted both
    after it and before it (text scrubbed before the value was learned is cleared again
    with :meth:`redact_known`)."""
    checked = leaked_before = 0
    misses = []
    for i, case in enumerate(single_value_cases()):
        value = case.secrets[0]
        if not learnable(value):
            continue
        secrets = SessionSecrets(os.urandom(32))
        earlier = secrets.scrub(BARE[(i + 1) % len(BARE)].format(v=value)).text
        assert value not in secrets.scrub(case.text).text, case
        later = secrets.scrub(BARE[i % len(BARE)].format(v=value)).text
        checked += 1
        leaked_before += value in scrub(BARE[i % len(BARE)].format(v=value)).text
        for text in (later, secrets.redact_known(earlier).text):
            if value in text:
                misses.append((case.kind, text))
    assert checked >= 600, checked
    assert leaked_before >= 100  # the premise: the rules alone miss many bare copies
    assert not misses, misses[:10]


def test_only_values_that_cannot_be_ordinary_words_are_learned() -> None:
    secrets = SessionSecrets(os.urandom(32))
    result = secrets.scrub("password=Lantern and DB_PASSWORD=Kiwi42&xy")
    assert "Lantern" not in result.text and "Kiwi42&xy" not in result.text
    assert len(secrets) == 1  # "Lantern" alone would hide every lantern of the session
    assert secrets.redact_known("a Lantern deploy with Kiwi42&xy!").text == \
        "a Lantern deploy with [REDACTED:password]!"
    # inside a longer word or run the value is not a copy of it
    assert secrets.redact_known("xKiwi42&xyz").text == "xKiwi42&xyz"


def test_what_is_kept_is_a_keyed_digest_never_the_value() -> None:
    key = os.urandom(32)
    secrets = SessionSecrets(key)
    secrets.scrub("export API_TOKEN=Zq81vR3tYp0wLx")
    kept = secrets.new()
    assert [(k.length, k.kind) for k in kept] == [(14, "token")]
    assert b"Zq81vR3tYp0wLx" not in kept[0].digest
    assert secrets.new() == []  # handed out once
    again = SessionSecrets(key, kept)  # a later run of the same session
    assert again.redact_known("curl -u ci:Zq81vR3tYp0wLx").text == "curl -u ci:[REDACTED:token]"
    stranger = SessionSecrets(os.urandom(32), kept)  # another key: another digest
    assert stranger.redact_known("Zq81vR3tYp0wLx").text == "Zq81vR3tYp0wLx"
    with pytest.raises(ValueError, match="digest key"):
        SessionSecrets(b"short")


def split_cases() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """``(kind, variant, text, pieces that must be gone)`` for every provider token of the
    corpus in every way of splitting it."""
    rng = random.Random(7)
    out = []
    values = dict.fromkeys((c.kind, c.secrets[0]) for c in single_value_cases()
                           if c.kind in TOKEN_KINDS and _TOKEN.fullmatch(c.secrets[0]))
    for kind, v in values:
        for name, fmt in SPLIT.items():
            i = rng.randint(len(v) // 3, 2 * len(v) // 3)
            j = rng.randint(i + 3, len(v) - 3) if name == "three_pieces" else len(v)
            pieces = (v[:i], v[i:j], v[j:]) if name == "three_pieces" else (v[:i], v[i:])
            text = fmt.format(a=pieces[0], b=pieces[1], c=pieces[-1])
            out.append((kind, name, text, tuple(p for p in pieces if len(p) >= 6)))
    return out


#: Concatenations and YAML blocks that hold no key: left exactly as they are.
ORDINARY = [
    'msg = "hello " + "world"',
    'path = "src/" + "main.py"',
    "x = 'abc' 'def'",
    'url = "https://example.com/" + "api/v1/users"',
    "select 'user_' || 'name' from t",
    'const cls = "btn-primary" + " " + "btn-large"',
    'label = "Total: " + "42"',
    'key = "config" . "Loader"',
    'name = "get" + "UserAccountSettings" + "ById"',
    "items:\n  - >-\n    some text\n    more text\n",
    "description: >\n  The quick brown fox\n  jumps over the dog\n",
    "run: |\n  make build\n  make test\n",
    'ls -la \\\n  --color=auto /srv/app',
]


def test_keys_split_over_literals_continuations_and_yaml_blocks_are_redacted_whole() -> None:
    cases = split_cases()
    assert len(cases) >= 2000 and len({k for k, *_ in cases}) >= 25
    misses = [(kind, name, text) for kind, name, text, pieces in cases
              if any(p in scrub(text).text for p in pieces)]
    assert not misses, misses[:10]
    assert [scrub(code).text for code in ORDINARY] == ORDINARY
    # an escaped line break inside JSON is no shell line continuation
    assert scrub('{"output": "DB_PASSWORD=Kiwi42&xy\\nDB_USER=app"}').text == \
        '{"output": "DB_PASSWORD=[REDACTED:password]\\nDB_USER=app"}'


def test_a_split_key_is_one_placeholder_and_learned_whole() -> None:
    key = "s" + "k-proj-" + "Xq3vT9bWm2LpR7sYd4Kz8NcFh6GjQ1aE5uVo0iBy"
    result, values = scrub_found(f'client = OpenAI(api_key="{key[:14]}" + "{key[14:]}")')
    assert result.text == 'client = OpenAI(api_key="[REDACTED:openai_api_key]")'
    assert values == [(key, "openai_api_key")]
    result, values = scrub_found(f"token = '{'gh' + 'p_'}' 'aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z'")
    assert result.text == "token = '[REDACTED:github_token]'"

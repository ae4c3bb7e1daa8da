"""Tests of opencode_memoryd.install.jsonc: reading JSONC and editing one member in place."""

from __future__ import annotations

import json
import random

import pytest

from opencode_configs import (
    COMMENTED,
    ENTRY,
    EXE,
    EXISTING_MCP,
    EXISTING_MCP_TRAILING,
    PATH,
    ROUND_TRIPS,
)
from opencode_memoryd.install import jsonc


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_set_then_remove_restores_the_exact_bytes(name: str) -> None:
    original = ROUND_TRIPS[name]
    before = jsonc.loads(original)
    assert isinstance(before, dict)
    edited = jsonc.set_member(original, PATH, ENTRY)
    after = jsonc.loads(edited)
    assert isinstance(after, dict)
    assert after["mcp"]["memoryd"] == ENTRY
    assert {k: v for k, v in after.items() if k != "mcp"} == {
        k: v for k, v in before.items() if k != "mcp"}
    assert {k: v for k, v in after["mcp"].items() if k != "memoryd"} == before.get("mcp", {})
    assert jsonc.remove_member(edited, PATH) == original


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_an_edit_only_adds_lines_and_keeps_the_file_style(name: str) -> None:
    original = ROUND_TRIPS[name]
    edited = jsonc.set_member(original, PATH, ENTRY)
    if "\r\n" in original:
        assert "\n" not in edited.replace("\r\n", "")
    for comment in ("// the schema", "/* before the comma */", "// no trailing comma here",
                    "// 名前", "// the end"):
        assert edited.count(comment) == original.count(comment)
    if name == "tabs":
        added = [line for line in edited.splitlines() if "memoryd" in line or EXE in line]
        assert added and all(line.startswith("\t\t") for line in added)
    if name == "four-spaces-no-final-newline":
        assert '\n    "mcp": {\n        "memoryd": {\n            "type": "local",' in edited
    if name == "one-line":
        assert "\n" not in edited


def test_set_member_replaces_a_value_in_place() -> None:
    edited = jsonc.set_member(EXISTING_MCP, PATH, ENTRY)
    other = {**ENTRY, "command": ["/new/opencode-memoryd", "mcp"]}
    again = jsonc.set_member(edited, PATH, other)
    assert jsonc.loads(again)["mcp"]["memoryd"] == other  # type: ignore[index]
    assert again.replace("/new/opencode-memoryd", EXE) == edited


def test_the_trailing_comma_style_is_followed() -> None:
    edited = jsonc.set_member(EXISTING_MCP_TRAILING, PATH, ENTRY)
    assert '"files": {"type": "local", "command": ["files-mcp"]},\n    "memoryd": {' in edited
    assert edited.endswith('      "enabled": true\n    },\n  },\n}\n')


@pytest.mark.parametrize(("original", "restored"), [
    ("", '{}\n'),
    ("{}", "{}"),
    ("{}\n", "{}\n"),
    ('{\n  "mcp": {}\n}\n', "{}\n"),
    ("// nothing yet\n/* really */\n", "// nothing yet\n/* really */\n{}\n"),
    ('{\n  "mcp": { // none yet\n  }\n}\n', '{\n  "mcp": { // none yet\n  }\n}\n'),
])
def test_empty_documents_and_objects(original: str, restored: str) -> None:
    edited = jsonc.set_member(original, PATH, ENTRY)
    assert jsonc.loads(edited) == {"mcp": {"memoryd": ENTRY}}
    for comment in ("// nothing yet", "/* really */", "// none yet"):
        assert edited.count(comment) == original.count(comment)
    assert jsonc.remove_member(edited, PATH) == restored


def test_remove_member_leaves_other_servers_and_is_a_no_op_when_absent() -> None:
    text = jsonc.set_member(EXISTING_MCP, PATH, ENTRY)
    assert jsonc.remove_member(EXISTING_MCP, PATH) == EXISTING_MCP
    assert jsonc.remove_member(COMMENTED, PATH) == COMMENTED
    first = '{\n  "mcp": {\n    "memoryd": {"type": "local"},\n    "web": {}\n  }\n}\n'
    assert jsonc.remove_member(first, PATH) == '{\n  "mcp": {\n    "web": {}\n  }\n}\n'
    assert jsonc.remove_member(text, PATH) == EXISTING_MCP


def test_remove_member_keeps_the_comments_around_the_member() -> None:
    above = '{\n  // my notes\n  "memoryd": {"type": "local"}\n}\n'
    assert jsonc.remove_member(above, ("memoryd",)) == '{\n  // my notes\n}\n'
    line_comment_then_brace = '{"z": 1, // note\n "mcp": {"memoryd": 1}}'
    out = jsonc.remove_member(line_comment_then_brace, PATH)
    assert out == '{"z": 1 // note\n}'
    assert jsonc.loads(out) == {"z": 1}


def _random_value(rnd: random.Random, depth: int = 0) -> object:
    roll = rnd.random()
    if depth < 3 and roll < 0.3:
        return {rnd.choice(["a", "mcp", "c/*", "d//", 'e"q']) + str(rnd.randint(0, 9)):
                _random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))}
    if depth < 3 and roll < 0.45:
        return [_random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    return rnd.choice([1, -2.5, True, None, "s", "http://x//y", "/* c */", "é"])


def _decorate(rnd: random.Random, text: str) -> str:
    """``text`` with comments after some commas, brackets and colons outside strings."""
    out, in_string, escaped = [], False, False
    for c in text:
        out.append(c)
        if in_string:
            in_string = escaped or c != '"'
            escaped = not escaped and c == "\\"
        elif c == '"':
            in_string = True
        elif c in ",{[" and rnd.random() < 0.3:
            out.append(rnd.choice([" /* x */", " // line\n", "\n  // own line\n"]))
        elif c == ":" and rnd.random() < 0.1:
            out.append(" /*k*/ ")
    return "".join(out)


def test_random_documents_round_trip() -> None:
    rnd = random.Random(20240611)
    for _ in range(400):
        value = _random_value(rnd)
        doc = {k: v for k, v in (value if isinstance(value, dict) else {"z": value}).items()
               if k != "mcp"}
        if rnd.random() < 0.5:
            doc["mcp"] = {f"w{k}": {"type": "remote"} for k in range(rnd.randint(1, 2))}
        text = _decorate(rnd, json.dumps(doc, indent=rnd.choice([None, 2, "\t"]),
                                         ensure_ascii=False))
        if rnd.random() < 0.3:
            text = text.replace("\n", "\r\n")
        assert jsonc.loads(text) == doc, text
        edited = jsonc.set_member(text, PATH, ENTRY)
        assert jsonc.loads(edited) == {**doc, "mcp": {**doc.get("mcp", {}), "memoryd": ENTRY}}
        if doc:
            assert jsonc.remove_member(edited, PATH) == text, text
        key = rnd.choice(sorted(doc)) if doc else None
        if key is not None:
            rest = {k: v for k, v in doc.items() if k != key}
            assert jsonc.loads(jsonc.remove_member(text, (key,))) == rest, text


@pytest.mark.parametrize(("text", "message"), [
    ('{"a": "unterminated}', "unterminated string"),
    ('{"a": 1 /* open', "unterminated comment"),
    ('{"a": 1 "b": 2}', "expected ',' or '}'"),
    ('{"a": 1', "the text ends"),
    ('{"a": 1} {}', "the end of the text"),
    ('{a: 1}', "a key"),
    ('{"a": 1 / 2}', "unexpected '/'"),
    ('{"a": "line\nbreak"}', "line break inside a string"),
])
def test_invalid_jsonc_is_reported_with_its_position(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        jsonc.set_member(text, PATH, ENTRY)


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2]", "top-level value is not an object"),
    ('{"mcp": "off"}', "'mcp' is not an object"),
    ('{"mcp": {}, "mcp": {}}', "duplicate key 'mcp'"),
    ('{"mcp": {"memoryd": 1, "memoryd": 2}}', "duplicate key 'mcp.memoryd'"),
])
def test_paths_through_non_objects_or_duplicates_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        jsonc.set_member(text, PATH, ENTRY)


def test_loads_reads_jsonc_like_opencode() -> None:
    assert jsonc.loads(COMMENTED) == {
        "$schema": "https://opencode.ai/config.json",
        "theme": "tokyonight",
        "model": "anthropic/claude-sonnet-4",
        "instructions": ["~/notes/*.md", "http://example.test/a//b", "/* not a comment */"],
        "provider": {"local": {"options": {"baseURL": "http://127.0.0.1:8080/v1",
                                           "escaped": 'a"b\\'}}},
    }
    assert jsonc.loads("// only\n") is None
    assert jsonc.loads("[1, 2,]") == [1, 2]
    with pytest.raises(ValueError):
        jsonc.loads("{,}")

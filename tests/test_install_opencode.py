"""Tests of opencode_memoryd.install.jsonc and .opencode: JSONC edits, the plugin, install."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from opencode_memoryd.errors import InstallRefusedError
from opencode_memoryd.install import jsonc
from opencode_memoryd.install.opencode import (
    PLUGIN_HEADER,
    config_path,
    install,
    mcp_entry,
    plugin_path,
    render_plugin,
    uninstall,
)

EXE = "/opt/memoryd/bin/opencode-memoryd"
PATH = ("mcp", "memoryd")
ENTRY = {"type": "local", "command": [EXE, "mcp"], "enabled": True}
NODE = shutil.which("node")

# --------------------------------------------------------------------------------------
# A corpus of global configs as people write them
# --------------------------------------------------------------------------------------

COMMENTED = """\
// OpenCode global config
{
  "$schema": "https://opencode.ai/config.json", // the schema
  /* the theme
     for every project */
  "theme": "tokyonight",
  "model": "anthropic/claude-sonnet-4" /* before the comma */ ,
  "instructions": ["~/notes/*.md", "http://example.test/a//b", "/* not a comment */"],
  "provider": {
    "local": {
      "options": { "baseURL": "http://127.0.0.1:8080/v1", "escaped": "a\\"b\\\\" },
    },
  },
  // the end
}
"""

EXISTING_MCP = """\
{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    // search the web
    "web": {
      "type": "remote",
      "url": "https://example.test/mcp"
    } // no trailing comma here
  },
  "theme": "system"
}
"""

EXISTING_MCP_TRAILING = """\
{
  "mcp": {
    "web": {"type": "remote", "url": "https://example.test/mcp"},
    "files": {"type": "local", "command": ["files-mcp"]},
  },
}
"""

CRLF = '{\r\n  "theme": "dark",\r\n  "autoupdate": false\r\n}\r\n'
TABS = '{\n\t"theme": "dark",\n\t"mcp": {\n\t\t"x": {"type": "local", "command": ["x"]}\n\t}\n}\n'
FOUR = '{\n    "theme": "dark"\n}'
ONE_LINE = '{"theme":"dark","autoupdate":false}'
UNICODE = '{\n  "username": "Zoë ✓",  // 名前\n  "share": "manual"\n}\n'

ROUND_TRIPS = {
    "commented": COMMENTED,
    "existing-mcp": EXISTING_MCP,
    "existing-mcp-trailing-commas": EXISTING_MCP_TRAILING,
    "crlf": CRLF,
    "tabs": TABS,
    "four-spaces-no-final-newline": FOUR,
    "one-line": ONE_LINE,
    "unicode": UNICODE,
}


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


# --------------------------------------------------------------------------------------
# The plugin
# --------------------------------------------------------------------------------------

AWKWARD_SOCKET = Path("/tmp/my dir/it's \"quoted\" \\ $HOME ${x} é/control.sock")


def test_the_socket_path_is_embedded_as_a_string_literal() -> None:
    text = render_plugin(AWKWARD_SOCKET)
    assert text.startswith(PLUGIN_HEADER)
    line = next(x for x in text.splitlines() if x.startswith("const SOCKET = "))
    literal = line.split(" || ", 1)[1]
    assert json.loads(literal) == str(AWKWARD_SOCKET)
    assert "$socket" not in text
    assert "OPENCODE_MEMORYD_SOCKET" in text
    with pytest.raises(ValueError, match="absolute"):
        render_plugin(Path("relative.sock"))


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_rendered_plugin_is_valid_javascript(tmp_path: Path) -> None:
    module = tmp_path / "plugin.mjs"
    module.write_text(render_plugin(AWKWARD_SOCKET))
    done = subprocess.run([NODE or "node", "--check", str(module)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


# Drives the plugin's hooks the way OpenCode does, with a stand-in for Bun's fetch; prints
# one JSON object with what happened.
HARNESS = r"""
const calls = []
let mode = "ok"
globalThis.fetch = async (url, options) => {
  calls.push({ url: String(url), unix: options.unix, timed: options.signal instanceof AbortSignal })
  if (mode === "down") throw new Error("ECONNREFUSED")
  if (mode === "error") return new Response('{"error": {"type": "X"}}', { status: 500 })
  const marked = "<!-- opencode-memoryd context -->\nM"
  if (mode === "marked") return Response.json({ result: { text: marked } })
  if (mode === "empty") return Response.json({ result: { text: "" } })
  return Response.json({ result: { text: "## Memories\n- use pnpm" } })
}
const { OpencodeMemoryd } = await import(process.argv[2])
const hooks = await OpencodeMemoryd({ project: { id: "p1" }, directory: "/w/app", worktree: "/w" })
const system = async (sessionID, first = "You are OpenCode.") => {
  const output = { system: [first] }
  await hooks["experimental.chat.system.transform"]({ sessionID, model: {} }, output)
  return output.system
}
const out = {}
const parts = [
  { type: "text", text: "Fix the login bug" },
  { type: "text", text: "memories", synthetic: true },
  { type: "file", url: "file:///x" },
  { type: "text", text: "in auth.ts" },
]
await hooks["chat.message"]({ sessionID: "s1" }, { message: {}, parts })
const later = [{ type: "text", text: "later" }]
await hooks["chat.message"]({ sessionID: "s1" }, { message: {}, parts: later })
out.title = await system("s1", "You are a title generator. Output a title.")
out.callsAfterTitle = calls.length
out.first = await system("s1")
out.second = await system("s1")
out.noSession = await system(undefined)
out.callsS1 = calls.length
out.call = calls[0]
mode = "down"; out.down = await system("s2")
mode = "error"; out.error = await system("s3")
mode = "marked"; out.marked = await system("s4")
mode = "empty"; out.empty = await system("s5")
mode = "ok"; out.afterRecovery = await system("s2")
await hooks.event({ event: { type: "session.deleted", properties: { info: { id: "s2" } } } })
await hooks.event({ event: { type: "session.idle" } })
out.afterDelete = await system("s2")
out.calls = calls.length
await hooks["chat.message"](undefined, undefined)
await hooks["experimental.chat.system.transform"](undefined, undefined)
process.stdout.write(JSON.stringify(out))
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("override", [None, "/run/other.sock"])
def test_the_plugin_injects_one_block_per_session(tmp_path: Path, override: str | None) -> None:
    module = tmp_path / "plugin.mjs"
    module.write_text(render_plugin(Path("/run/user/1000/opencode-memoryd/control.sock")))
    harness = tmp_path / "harness.mjs"
    harness.write_text(HARNESS)
    env = {"PATH": os.environ["PATH"]}
    if override:
        env["OPENCODE_MEMORYD_SOCKET"] = override
    done = subprocess.run([NODE or "node", str(harness), module.as_uri()], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = json.loads(done.stdout)  # nothing else was printed
    marker = "<!-- opencode-memoryd context -->"
    block = marker + "\n## Memories\n- use pnpm"
    assert out["title"] == ["You are a title generator. Output a title."]
    assert out["callsAfterTitle"] == 0
    assert out["first"] == ["You are OpenCode.", block]
    assert out["second"] == out["first"]
    assert out["noSession"] == ["You are OpenCode."]
    assert out["callsS1"] == 1
    assert out["call"]["unix"] == (override or "/run/user/1000/opencode-memoryd/control.sock")
    assert out["call"]["timed"] is True
    url = out["call"]["url"]
    assert url.startswith("http://opencode-memoryd/v1/context?")
    from urllib.parse import parse_qs, urlsplit

    assert parse_qs(urlsplit(url).query) == {
        "directory": ["/w/app"], "session": ["s1"], "project": ["p1"], "worktree": ["/w"],
        "query": ["Fix the login bug\nin auth.ts"]}
    assert out["down"] == out["error"] == out["empty"] == ["You are OpenCode."]
    assert out["marked"] == ["You are OpenCode.", marker + "\nM"]
    assert out["afterRecovery"] == ["You are OpenCode."]  # the session keeps what it had
    assert out["afterDelete"] == ["You are OpenCode.", block]
    assert out["calls"] == 6


# --------------------------------------------------------------------------------------
# install / uninstall
# --------------------------------------------------------------------------------------


@pytest.fixture
def socket(tmp_path: Path) -> Path:
    return tmp_path / "run" / "control.sock"


def opencode_dir(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "opencode"


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_a_fresh_install_creates_the_plugin_and_opencode_json(
        isolated_env: dict[str, str], socket: Path) -> None:
    report = install(socket=socket, env=isolated_env, executable=EXE)
    assert [(c.kind, c.action) for c in report.changes] == [("plugin", "create"),
                                                           ("config", "create")]
    plugin = plugin_path(isolated_env)
    assert plugin == opencode_dir(isolated_env) / "plugin" / "opencode-memoryd.js"
    assert plugin.read_text() == render_plugin(socket)
    assert stat.S_IMODE(plugin.stat().st_mode) == 0o644
    config = opencode_dir(isolated_env) / "opencode.json"
    assert report.changes[1].path == config
    value = json.loads(config.read_text())
    assert value["$schema"] == "https://opencode.ai/config.json"
    assert value["mcp"]["memoryd"] == {
        "type": "local",
        "command": [EXE, "mcp"],
        "environment": {k: isolated_env[k] for k in
                        ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")},
        "enabled": True,
    }
    assert report.changed and not report.dry_run


def test_install_twice_reports_unchanged(isolated_env: dict[str, str], socket: Path) -> None:
    install(socket=socket, env=isolated_env, executable=EXE)
    before = snapshot(opencode_dir(isolated_env))
    again = install(socket=socket, env=isolated_env, executable=EXE)
    assert [c.action for c in again.changes] == ["unchanged", "unchanged"]
    assert not again.changed and again.diff == ""
    assert snapshot(opencode_dir(isolated_env)) == before


def test_a_dry_run_writes_nothing(isolated_env: dict[str, str], socket: Path) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.jsonc").write_text(COMMENTED)
    report = install(socket=socket, env=isolated_env, executable=EXE, dry_run=True)
    assert report.dry_run and report.changed
    assert snapshot(folder) == {"opencode.jsonc": COMMENTED.encode()}
    assert f"+++ {folder / 'opencode.jsonc'}" in report.diff
    assert '+  "mcp": {' in report.diff
    assert f"+++ {plugin_path(isolated_env)}" in report.diff
    install(socket=socket, env=isolated_env, executable=EXE)
    written = snapshot(folder)
    assert uninstall(env=isolated_env, executable=EXE, dry_run=True).changed
    assert snapshot(folder) == written


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_uninstall_restores_the_original_config(
        isolated_env: dict[str, str], socket: Path, name: str) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    config = folder / ("opencode.jsonc" if name == "commented" else "opencode.json")
    config.write_bytes(ROUND_TRIPS[name].encode())
    report = install(socket=socket, env=isolated_env, executable=EXE)
    assert report.changes[1].path == config and report.changes[1].action == "update"
    assert uninstall(env=isolated_env, executable=EXE).changed
    assert snapshot(folder) == {config.name: ROUND_TRIPS[name].encode()}
    again = uninstall(env=isolated_env, executable=EXE)
    assert not again.changed


def test_uninstall_after_a_fresh_install_leaves_no_file(
        isolated_env: dict[str, str], socket: Path) -> None:
    install(socket=socket, env=isolated_env, executable=EXE)
    report = uninstall(env=isolated_env, executable=EXE)
    assert [(c.kind, c.action) for c in report.changes] == [("plugin", "remove"),
                                                           ("config", "remove")]
    assert snapshot(opencode_dir(isolated_env)) == {}


def test_the_config_file_follows_opencode_precedence(
        isolated_env: dict[str, str], socket: Path) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"theme": "a"}\n')
    assert config_path(isolated_env) == folder / "config.json"
    (folder / "opencode.json").write_text('{"theme": "b"}\n')
    assert config_path(isolated_env) == folder / "opencode.json"
    (folder / "opencode.jsonc").write_text('{"theme": "c"}\n')
    assert config_path(isolated_env) == folder / "opencode.jsonc"
    install(socket=socket, env=isolated_env, executable=EXE)
    assert (folder / "opencode.json").read_text() == '{"theme": "b"}\n'
    assert "memoryd" in (folder / "opencode.jsonc").read_text()


def test_uninstall_cleans_every_config_file(isolated_env: dict[str, str], socket: Path) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(EXISTING_MCP)
    install(socket=socket, env=isolated_env, executable=EXE)  # into opencode.json
    (folder / "opencode.jsonc").write_text(ONE_LINE)
    install(socket=socket, env=isolated_env, executable=EXE)  # and into opencode.jsonc
    report = uninstall(env=isolated_env, executable=EXE)
    assert [(c.path.name, c.action) for c in report.changes] == [
        ("opencode-memoryd.js", "remove"), ("opencode.jsonc", "update"),
        ("opencode.json", "update")]
    assert (folder / "opencode.json").read_text() == EXISTING_MCP
    assert (folder / "opencode.jsonc").read_text() == ONE_LINE


def test_an_older_entry_of_ours_is_updated(isolated_env: dict[str, str], socket: Path) -> None:
    install(socket=socket, env=isolated_env, executable="/old/venv/bin/opencode-memoryd")
    report = install(socket=socket, env=isolated_env, executable="/new/bin/python -m "
                                                                  "opencode_memoryd")
    assert [c.action for c in report.changes] == ["unchanged", "update"]
    entry = json.loads(config_path(isolated_env).read_text())["mcp"]["memoryd"]
    assert entry["command"] == ["/new/bin/python", "-m", "opencode_memoryd", "mcp"]
    other_socket = install(socket=Path("/elsewhere.sock"), env=isolated_env,
                           executable="/new/bin/python -m opencode_memoryd")
    assert [c.action for c in other_socket.changes] == ["update", "unchanged"]


FOREIGN = '{\n  "mcp": {\n    "memoryd": {"type": "local", "command": ["npx", "memoryd"]}\n  }\n}\n'


def test_a_foreign_entry_is_refused_unless_forced(
        isolated_env: dict[str, str], socket: Path) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(FOREIGN)
    with pytest.raises(InstallRefusedError, match="not written by opencode-memoryd"):
        install(socket=socket, env=isolated_env, executable=EXE)
    assert snapshot(folder) == {"opencode.json": FOREIGN.encode()}  # no plugin either
    report = uninstall(env=isolated_env, executable=EXE)
    assert not report.changed and "left in place" in report.changes[1].note
    install(socket=socket, env=isolated_env, executable=EXE, force=True)
    assert jsonc.loads((folder / "opencode.json").read_text()) == {"mcp": {"memoryd": mcp_entry(
        EXE, isolated_env)}}


def test_a_foreign_entry_is_removed_by_a_forced_uninstall(
        isolated_env: dict[str, str]) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(FOREIGN)
    uninstall(env=isolated_env, executable=EXE, force=True)
    assert (folder / "opencode.json").read_text() == "{}\n"


def test_a_foreign_plugin_file_is_refused_unless_forced(
        isolated_env: dict[str, str], socket: Path) -> None:
    plugin = plugin_path(isolated_env)
    plugin.parent.mkdir(parents=True)
    plugin.write_text("export const Mine = async () => ({})\n")
    with pytest.raises(InstallRefusedError, match="plugin file was not written"):
        install(socket=socket, env=isolated_env, executable=EXE)
    assert not config_path(isolated_env).exists()
    report = uninstall(env=isolated_env, executable=EXE)
    assert report.changes[0].action == "unchanged" and report.changes[0].note
    assert plugin.exists()
    install(socket=socket, env=isolated_env, executable=EXE, force=True)
    assert plugin.read_text().startswith(PLUGIN_HEADER)


@pytest.mark.parametrize(("content", "message"), [
    (b'{"theme": "dark",, }', "not valid JSONC"),
    (b'{"mcp": ["x"]}', '"mcp" is not an object'),
    (b'["x"]', "top-level value is not an object"),
    (b'{"theme": "\xff"}', "not UTF-8"),
])
def test_an_unusable_config_is_refused_and_kept(
        isolated_env: dict[str, str], socket: Path, content: bytes, message: str) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_bytes(content)
    with pytest.raises(InstallRefusedError, match=message) as caught:
        install(socket=socket, env=isolated_env, executable=EXE)
    assert caught.value.path == str(folder / "opencode.json")
    assert snapshot(folder) == {"opencode.json": content}


def test_bom_mode_and_symlink_are_kept(isolated_env: dict[str, str], socket: Path,
                                       tmp_path: Path) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    real = tmp_path / "dotfiles" / "opencode.json"
    real.parent.mkdir()
    original = "\ufeff" + EXISTING_MCP
    real.write_text(original, encoding="utf-8")
    real.chmod(0o600)
    (folder / "opencode.json").symlink_to(real)
    install(socket=socket, env=isolated_env, executable=EXE)
    assert (folder / "opencode.json").is_symlink()
    assert real.read_text(encoding="utf-8").startswith("\ufeff{")
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    uninstall(env=isolated_env, executable=EXE)
    assert (folder / "opencode.json").is_symlink()
    assert real.read_text(encoding="utf-8") == original


def test_a_config_with_only_comments_gets_an_object(
        isolated_env: dict[str, str], socket: Path) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.jsonc").write_text("// my settings will go here\n")
    install(socket=socket, env=isolated_env, executable=EXE)
    text = (folder / "opencode.jsonc").read_text()
    assert text.startswith("// my settings will go here\n{\n")
    assert jsonc.loads(text) == {"mcp": {"memoryd": mcp_entry(EXE, isolated_env)}}


def test_the_environment_pins_only_what_is_set(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "OPENCODE_MEMORYD_CONFIG": "/etc/m.toml",
           "XDG_DATA_HOME": "relative/ignored", "OPENAI_API_KEY": "sk-secret"}
    assert mcp_entry(EXE, env)["environment"] == {"OPENCODE_MEMORYD_CONFIG": "/etc/m.toml"}
    assert "environment" not in mcp_entry(EXE, {"HOME": str(tmp_path)})
    with pytest.raises(ValueError, match="absolute"):
        mcp_entry("opencode-memoryd", env)

"""Tests of opencode_memoryd.install.opencode: the plugin, install and uninstall."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from conftest import socket_file
from opencode_configs import COMMENTED, EXE, EXISTING_MCP, ONE_LINE, ROUND_TRIPS
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
from opencode_memoryd.usecases.fence import seal

NODE = shutil.which("node")

# --------------------------------------------------------------------------------------
# The plugin
# --------------------------------------------------------------------------------------

def test_the_plugin_is_the_same_text_whatever_the_environment(
        isolated_env: dict[str, str], tmp_path: Path) -> None:
    text = render_plugin()
    assert text.startswith(PLUGIN_HEADER)
    assert "$socket" not in text and "OPENCODE_MEMORYD_SOCKET" in text
    assert "export default { id: APP, server, setup }" in text
    written = []
    for runtime in (None, str(tmp_path / "run")):
        env = dict(isolated_env)
        if runtime:
            env["XDG_RUNTIME_DIR"] = runtime
        install(env=env, executable=EXE)
        written.append(plugin_path(env).read_bytes())
    assert written == [text.encode()] * 2


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_rendered_plugin_is_valid_javascript(tmp_path: Path) -> None:
    module = tmp_path / "plugin.mjs"
    module.write_text(render_plugin())
    done = subprocess.run([NODE or "node", "--check", str(module)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


# Drives the plugin's hooks the way OpenCode does, with a stand-in for Bun's fetch; prints
# one JSON object with what happened.
HARNESS = r"""
const calls = []
let mode = "ok"
globalThis.Bun = { version: "stand-in" }  // the plugin then uses fetch, as in Bun
globalThis.fetch = async (url, options) => {
  calls.push({ url: String(url), unix: options.unix, timed: options.signal instanceof AbortSignal })
  if (mode === "down") throw new Error("ECONNREFUSED")
  if (mode === "error") return new Response('{"error": {"type": "X"}}', { status: 500 })
  const marked = "<!-- opencode-memoryd context -->\nM"
  if (mode === "marked") return Response.json({ result: { text: marked } })
  if (mode === "empty") return Response.json({ result: { text: "" } })
  if (mode === "unmarked") return Response.json({ result: { text: "## Memories\n- use pnpm" } })
  const tampered = process.env.SEALED.replace("pnpm", "npm")
  if (mode === "tampered") return Response.json({ result: { text: tampered } })
  return Response.json({ result: { text: process.env.SEALED } })
}
const plugin = (await import(process.argv[2])).default
const hooks = await plugin.server({ project: { id: "p1" }, directory: "/w/app", worktree: "/w" })
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
mode = "unmarked"; out.unmarked = await system("s6")
mode = "tampered"; out.tampered = await system("s7")
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
@pytest.mark.parametrize("override", [False, True])
def test_the_plugin_injects_one_block_per_session(tmp_path: Path, override: bool) -> None:
    # found by the rules the command uses: $XDG_RUNTIME_DIR/opencode-memoryd/control.sock
    socket = socket_file(tmp_path / "run" / "opencode-memoryd" / "control.sock")
    module = tmp_path / "plugin.mjs"
    module.write_text(render_plugin())
    harness = tmp_path / "harness.mjs"
    harness.write_text(HARNESS)
    block = seal(["## Memories", '- 2026-01-10: "use pnpm"'])
    env = {"PATH": os.environ["PATH"], "SEALED": block, "HOME": str(tmp_path / "home"),
           "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    if override:
        env["OPENCODE_MEMORYD_SOCKET"] = str(socket_file(tmp_path / "other" / "x.sock"))
    done = subprocess.run([NODE or "node", str(harness), module.as_uri()], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = json.loads(done.stdout)  # nothing else was printed
    assert out["title"] == ["You are a title generator. Output a title."]
    assert out["callsAfterTitle"] == 0
    assert out["first"] == ["You are OpenCode.", block]
    assert out["second"] == out["first"]
    assert out["noSession"] == ["You are OpenCode."]
    assert out["callsS1"] == 1
    assert out["call"]["unix"] == (env.get("OPENCODE_MEMORYD_SOCKET") or str(socket))
    assert out["call"]["timed"] is True
    url = out["call"]["url"]
    assert url.startswith("http://opencode-memoryd/v1/context?")
    assert parse_qs(urlsplit(url).query) == {
        "directory": ["/w/app"], "session": ["s1"], "project": ["p1"], "worktree": ["/w"],
        "query": ["Fix the login bug\nin auth.ts"]}
    # only a whole block is used: not an unmarked, cut or changed one
    assert out["down"] == out["error"] == out["empty"] == ["You are OpenCode."]
    assert out["marked"] == out["unmarked"] == out["tampered"] == ["You are OpenCode."]
    assert out["afterRecovery"] == ["You are OpenCode."]  # the session keeps what it had
    assert out["afterDelete"] == ["You are OpenCode.", block]
    assert out["calls"] == 8


# --------------------------------------------------------------------------------------
# install / uninstall
# --------------------------------------------------------------------------------------


def opencode_dir(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "opencode"


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_a_fresh_install_creates_the_plugin_and_opencode_json(
        isolated_env: dict[str, str]) -> None:
    report = install(env=isolated_env, executable=EXE)
    assert [(c.kind, c.action) for c in report.changes] == [("plugin", "create"),
                                                           ("config", "create")]
    plugin = plugin_path(isolated_env)
    assert plugin == opencode_dir(isolated_env) / "plugin" / "opencode-memoryd.js"
    assert plugin.read_text() == render_plugin()
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


def test_install_twice_reports_unchanged(isolated_env: dict[str, str]) -> None:
    install(env=isolated_env, executable=EXE)
    before = snapshot(opencode_dir(isolated_env))
    again = install(env=isolated_env, executable=EXE)
    assert [c.action for c in again.changes] == ["unchanged", "unchanged"]
    assert not again.changed and again.diff == ""
    assert snapshot(opencode_dir(isolated_env)) == before


def test_a_dry_run_writes_nothing(isolated_env: dict[str, str]) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.jsonc").write_text(COMMENTED)
    report = install(env=isolated_env, executable=EXE, dry_run=True)
    assert report.dry_run and report.changed
    assert snapshot(folder) == {"opencode.jsonc": COMMENTED.encode()}
    assert f"+++ {folder / 'opencode.jsonc'}" in report.diff
    assert '+  "mcp": {' in report.diff
    assert f"+++ {plugin_path(isolated_env)}" in report.diff
    install(env=isolated_env, executable=EXE)
    written = snapshot(folder)
    assert uninstall(env=isolated_env, executable=EXE, dry_run=True).changed
    assert snapshot(folder) == written


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_uninstall_restores_the_original_config(
        isolated_env: dict[str, str], name: str) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    config = folder / ("opencode.jsonc" if name == "commented" else "opencode.json")
    config.write_bytes(ROUND_TRIPS[name].encode())
    report = install(env=isolated_env, executable=EXE)
    assert report.changes[1].path == config and report.changes[1].action == "update"
    assert uninstall(env=isolated_env, executable=EXE).changed
    assert snapshot(folder) == {config.name: ROUND_TRIPS[name].encode()}
    again = uninstall(env=isolated_env, executable=EXE)
    assert not again.changed


def test_uninstall_after_a_fresh_install_leaves_no_file(
        isolated_env: dict[str, str]) -> None:
    install(env=isolated_env, executable=EXE)
    report = uninstall(env=isolated_env, executable=EXE)
    assert [(c.kind, c.action) for c in report.changes] == [("plugin", "remove"),
                                                           ("config", "remove")]
    assert snapshot(opencode_dir(isolated_env)) == {}


def test_the_config_file_follows_opencode_precedence(
        isolated_env: dict[str, str]) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"theme": "a"}\n')
    assert config_path(isolated_env) == folder / "config.json"
    (folder / "opencode.json").write_text('{"theme": "b"}\n')
    assert config_path(isolated_env) == folder / "opencode.json"
    (folder / "opencode.jsonc").write_text('{"theme": "c"}\n')
    assert config_path(isolated_env) == folder / "opencode.jsonc"
    install(env=isolated_env, executable=EXE)
    assert (folder / "opencode.json").read_text() == '{"theme": "b"}\n'
    assert "memoryd" in (folder / "opencode.jsonc").read_text()


def test_uninstall_cleans_every_config_file(isolated_env: dict[str, str]) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(EXISTING_MCP)
    install(env=isolated_env, executable=EXE)  # into opencode.json
    (folder / "opencode.jsonc").write_text(ONE_LINE)
    install(env=isolated_env, executable=EXE)  # and into opencode.jsonc
    report = uninstall(env=isolated_env, executable=EXE)
    assert [(c.path.name, c.action) for c in report.changes] == [
        ("opencode-memoryd.js", "remove"), ("opencode.jsonc", "update"),
        ("opencode.json", "update")]
    assert (folder / "opencode.json").read_text() == EXISTING_MCP
    assert (folder / "opencode.jsonc").read_text() == ONE_LINE


def test_an_older_entry_of_ours_is_updated(isolated_env: dict[str, str]) -> None:
    install(env=isolated_env, executable="/old/venv/bin/opencode-memoryd")
    report = install(env=isolated_env, executable="/new/bin/python -m "
                                                                  "opencode_memoryd")
    assert [c.action for c in report.changes] == ["unchanged", "update"]
    entry = json.loads(config_path(isolated_env).read_text())["mcp"]["memoryd"]
    assert entry["command"] == ["/new/bin/python", "-m", "opencode_memoryd", "mcp"]
    # a plugin of ours written by another version is replaced
    plugin_path(isolated_env).write_text(PLUGIN_HEADER + " older\n")
    older = install(env=isolated_env, executable="/new/bin/python -m opencode_memoryd")
    assert [c.action for c in older.changes] == ["update", "unchanged"]


FOREIGN = '{\n  "mcp": {\n    "memoryd": {"type": "local", "command": ["npx", "memoryd"]}\n  }\n}\n'


def test_a_foreign_entry_is_refused_unless_forced(
        isolated_env: dict[str, str]) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_text(FOREIGN)
    with pytest.raises(InstallRefusedError, match="not written by opencode-memoryd"):
        install(env=isolated_env, executable=EXE)
    assert snapshot(folder) == {"opencode.json": FOREIGN.encode()}  # no plugin either
    report = uninstall(env=isolated_env, executable=EXE)
    assert not report.changed and "left in place" in report.changes[1].note
    install(env=isolated_env, executable=EXE, force=True)
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
        isolated_env: dict[str, str]) -> None:
    plugin = plugin_path(isolated_env)
    plugin.parent.mkdir(parents=True)
    plugin.write_text("export const Mine = async () => ({})\n")
    with pytest.raises(InstallRefusedError, match="plugin file was not written"):
        install(env=isolated_env, executable=EXE)
    assert not config_path(isolated_env).exists()
    report = uninstall(env=isolated_env, executable=EXE)
    assert report.changes[0].action == "unchanged" and report.changes[0].note
    assert plugin.exists()
    install(env=isolated_env, executable=EXE, force=True)
    assert plugin.read_text().startswith(PLUGIN_HEADER)


@pytest.mark.parametrize(("content", "message"), [
    (b'{"theme": "dark",, }', "not valid JSONC"),
    (b'{"mcp": ["x"]}', '"mcp" is not an object'),
    (b'["x"]', "top-level value is not an object"),
    (b'{"theme": "\xff"}', "not UTF-8"),
])
def test_an_unusable_config_is_refused_and_kept(
        isolated_env: dict[str, str], content: bytes, message: str) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.json").write_bytes(content)
    with pytest.raises(InstallRefusedError, match=message) as caught:
        install(env=isolated_env, executable=EXE)
    assert caught.value.path == str(folder / "opencode.json")
    assert snapshot(folder) == {"opencode.json": content}


def test_bom_mode_and_symlink_are_kept(isolated_env: dict[str, str],
                                       tmp_path: Path) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    real = tmp_path / "dotfiles" / "opencode.json"
    real.parent.mkdir()
    original = "\ufeff" + EXISTING_MCP
    real.write_text(original, encoding="utf-8")
    real.chmod(0o600)
    (folder / "opencode.json").symlink_to(real)
    install(env=isolated_env, executable=EXE)
    assert (folder / "opencode.json").is_symlink()
    assert real.read_text(encoding="utf-8").startswith("\ufeff{")
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    uninstall(env=isolated_env, executable=EXE)
    assert (folder / "opencode.json").is_symlink()
    assert real.read_text(encoding="utf-8") == original


def test_a_config_with_only_comments_gets_an_object(
        isolated_env: dict[str, str]) -> None:
    folder = opencode_dir(isolated_env)
    folder.mkdir(parents=True)
    (folder / "opencode.jsonc").write_text("// my settings will go here\n")
    install(env=isolated_env, executable=EXE)
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


# --------------------------------------------------------------------------------------
# Where each OpenCode looks, and which OpenCode is installed
# --------------------------------------------------------------------------------------


def test_with_opencode_config_dir_the_plugin_goes_there_alone_and_uninstall_restores_both(
        isolated_env: dict[str, str], tmp_path: Path) -> None:
    home = Path(isolated_env["HOME"])
    default = install(env=isolated_env, executable=EXE)  # the XDG layout first
    assert default.changes[0].path == opencode_dir(isolated_env) / "plugin" / "opencode-memoryd.js"
    env = {**isolated_env, "OPENCODE_CONFIG_DIR": str(tmp_path / "oc-config")}
    (tmp_path / "oc-config").mkdir()
    before = snapshot(tmp_path / "oc-config")
    report = install(env=env, executable=EXE)
    moved = tmp_path / "oc-config" / "plugin" / "opencode-memoryd.js"
    first = report.changes[0]
    assert (first.kind, first.action, first.path) == ("plugin", "create", moved)
    assert moved.read_text() == render_plugin()
    # the MCP entry goes where 2.x reads its config too
    assert report.changes[1].path == tmp_path / "oc-config" / "opencode.json"
    assert "memoryd" in json.loads(report.changes[1].path.read_text())["mcp"]
    # 1.x would read both folders: the old copy must not stay beside the new one forever;
    # uninstall removes every copy of ours, in both layouts, and nothing else
    (opencode_dir(isolated_env) / "plugin" / "someone-else.js").write_text("// theirs\n")
    removed = uninstall(env=env, executable=EXE)
    assert sorted((c.kind, c.action, str(c.path)) for c in removed.changes
                  if c.kind == "plugin") == sorted([
        ("plugin", "remove", str(moved)),
        ("plugin", "remove", str(opencode_dir(isolated_env) / "plugin" / "opencode-memoryd.js"))])
    assert snapshot(tmp_path / "oc-config") == before  # only empty folders left
    assert not moved.exists()
    left = snapshot(home)
    assert [k for k in left if k.endswith(".js")] == [".config/opencode/plugin/someone-else.js"]
    assert not any(k.endswith(".json") for k in left)  # both configs were ours alone


def _fake_opencode(folder: Path, out: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "opencode"
    program.write_text(f"#!/bin/sh\nprintf '%s\\n' '{out}'\n")
    program.chmod(0o755)
    return folder


@pytest.mark.parametrize(("printed", "note"), [
    ("1.18.33", "OpenCode 1.18.33 loads it through server()"),
    ("2.0.32", "OpenCode 2.0.32 loads it through setup()"),
    ("1.17.4", "OpenCode 1.17.4 cannot load it (1.18.29 or later is needed): upgrade OpenCode"),
])
def test_install_opencode_says_which_opencode_loads_the_plugin_and_how(
        isolated_env: dict[str, str], tmp_path: Path, printed: str, note: str) -> None:
    from conftest import cli

    bin_dir = _fake_opencode(tmp_path / "bin", printed)
    code, out = cli("install-opencode",
                    env={**isolated_env, "PATH": f"{bin_dir}:{isolated_env['PATH']}"})
    assert code == 0, out
    assert f"plugin: {note}" in out


def test_without_opencode_on_path_install_says_so(isolated_env: dict[str, str]) -> None:
    from conftest import cli

    code, out = cli("install-opencode", env=isolated_env)
    assert code == 0, out
    assert "plugin: no `opencode` on PATH" in out


def test_the_genuine_opencode_version_is_read(isolated_env: dict[str, str]) -> None:
    from opencode_memoryd.install.opencode_plugin import opencode_version

    binary = Path(__file__).resolve().parents[1] / ".cache" / "opencode-ai" / "bin"
    if not (binary / "opencode").exists():
        pytest.skip("the OpenCode binary is not installed (tests/e2e/install-opencode.sh)")
    env = {**isolated_env, "PATH": f"{binary}:{isolated_env['PATH']}"}
    assert opencode_version(env) == "1.18.33"


# The 2.x half with a session look-up that never answers: the request still goes on, and
# the daemon is asked with the first user message of the request.
V2_HANGING_GET = r"""
globalThis.Bun = { version: "stand-in" }  // the plugin then uses fetch, as in Bun
const calls = []
globalThis.fetch = async (url) => {
  calls.push(String(url))
  return Response.json({ result: { text: process.env.SEALED } })
}
const plugin = (await import(process.argv[2])).default
let context
await plugin.setup({ session: {
  hook: async (name, callback) => { if (name === "context") context = callback },
  get: () => new Promise(() => {}),
} })
const event = { sessionID: "s1", kind: "primary", system: [{ type: "text", text: "base" }],
  messages: [{ role: "user", content: [{ type: "text", text: "fix the login bug" }] }] }
await context(event)
process.stdout.write(JSON.stringify({ system: event.system, calls }))
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_2x_hook_goes_on_when_the_session_look_up_never_answers(tmp_path: Path) -> None:
    socket = socket_file(tmp_path / "run" / "opencode-memoryd" / "control.sock")
    module = tmp_path / "plugin.mjs"
    module.write_text(render_plugin())
    harness = tmp_path / "harness.mjs"
    harness.write_text(V2_HANGING_GET)
    block = seal(["## Memories", '- 2026-01-10: "use pnpm"'])
    env = {"PATH": os.environ["PATH"], "SEALED": block, "HOME": str(tmp_path / "home"),
           "OPENCODE_MEMORYD_SOCKET": str(socket)}
    done = subprocess.run([NODE or "node", str(harness), module.as_uri()], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["system"] == [{"type": "text", "text": "base"}, {"type": "text", "text": block}]
    (url,) = out["calls"]
    assert parse_qs(urlsplit(url).query) == {"session": ["s1"],
                                             "query": ["fix the login bug"]}

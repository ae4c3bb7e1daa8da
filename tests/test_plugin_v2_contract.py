"""The installed OpenCode plugin against the OpenCode 2.x plugin contract, and the socket
found at run time, against a real daemon serving a real store.

OpenCode 2 is not installable here, so the contract is taken from its source,
anomalyco/opencode (commit and path of each fact):

- Loading: ``PluginModule.load`` imports the file and decodes the module with
  ``Schema.Struct({ default: Union(Struct({ id: String, effect: function }),
  Struct({ id: String, setup: function })) })``; anything else fails with "Plugin must
  export a default definition with an id and an effect or setup function."
  (07db2b92 ``packages/core/src/plugin/module.ts``). Files are found in the ``plugin`` and
  ``plugins`` folders of the global config folder (dbc74f5b
  ``packages/core/src/plugin/discovery.ts``, 8ff468ab
  ``packages/core/src/plugin/source-directory.ts``).
- ``setup(ctx)``: a Promise plugin's context (0ef9ef4b
  ``packages/plugin/src/promise/plugin.ts``); ``ctx.session.hook(name, callback)``
  resolves to a registration ``{ dispose }`` (baf3a659
  ``packages/plugin/src/promise/registration.ts``, 0a80062d
  ``packages/core/src/plugin/promise.ts``); ``ctx.session.get({ sessionID })`` gives
  ``Session.Info`` (``projectID``, ``location: { directory }``; 06f9d1a6
  ``packages/schema/src/session.ts``).
- The ``context`` hook's event is ``SessionContext``: ``sessionID``, ``agent``, ``model``,
  ``kind`` (``"primary" | "compaction" | "title" | "generate"``), ``system: SystemPart[]``
  (``{ type: "text", text }``), ``messages`` (LLM messages ``{ role, content: [{ type:
  "text", text }] }``), ``options``, ``tools``; the callback edits it in place (03545fd3
  ``packages/plugin/src/promise/session.ts``; 0f2daeba ``packages/core/src/plugin/hooks.ts``
  runs the callbacks in order and returns the same event).
- ``ctx.tool.hook("execute.before" | "execute.after", callback)``: events with ``tool``,
  ``sessionID``, ``agent``, ``messageID``, ``id`` (the call id) and ``input``; the after
  event adds ``status`` and, when ``"completed"``, a replaceable ``result`` (``{ output?,
  content?: string | [{ type: "text", text }], metadata? }``), when ``"error"``, ``error``
  (196e4612 ``packages/plugin/src/promise/tool.ts``, 0f131b3e
  ``packages/schema/src/tool.ts``).

The 1.x half (``server``) is called the way 1.18.33 calls it (its binary's loader, which
reports "must default export an object with server()"): ``server({ project, directory,
worktree })``. The genuine 1.18.33 is driven by
``tests/e2e``; these tests run the file under Node, whose ``fetch`` has no Unix sockets, so
they also cover the plugin's ``node:http`` path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import ACME, MANIFEST, start_daemon, wait_until, write_config
from opencode_memoryd.compose import DAEMON_INFO_FILE
from opencode_memoryd.config.loader import load_config
from opencode_memoryd.config.paths import state_dir, store_dir
from opencode_memoryd.install.opencode import install, plugin_path
from opencode_memoryd.models import Memory
from opencode_memoryd.store.edge import EdgeStore
from opencode_memoryd.usecases.context import MARKER
from test_context import SEED

pytestmark = pytest.mark.slow

NODE = shutil.which("node")
ACME_KEY = next(p["project_id"] for p in MANIFEST["projects"] if p["worktree"] == ACME)
MAIN = next(s["id"] for s in MANIFEST["sessions"]
            if s["kind"] == "main" and s["project_id"] == ACME_KEY)

# Loads the plugin file as 2.x does, calls setup() with a context shaped as 2.x documents,
# runs the registered hooks for each kind of request, then the 1.x half for the same
# session; prints one JSON object.
HARNESS = r"""
const [url, session, directory, project] = process.argv.slice(2)
const mod = await import(url)
const out = { exports: Object.keys(mod).sort() }
const def = mod.default
// 2.x: PluginModule.load's Definition (module.ts)
out.v2Shape = typeof def === "object" && def !== null && typeof def.id === "string" &&
  (typeof def.setup === "function" || typeof def.effect === "function")
// 1.18.33: a default export with an id is a module plugin: server() and no tui()
out.v1Shape = typeof def?.id === "string" && typeof def?.server === "function" &&
  def?.tui === undefined
out.id = def?.id
const registered = {}
const asked = []
const ctx = {
  app: { name: "opencode", version: "2.0.32", channel: "latest" },
  options: {},
  session: {
    hook: async (name, callback) => {
      (registered[name] ??= []).push(callback)
      return { dispose: async () => {} }
    },
    get: async ({ sessionID }) => {
      asked.push(sessionID)
      return { id: sessionID, projectID: project, title: "t", cost: 0,
               location: { directory }, time: { created: 0, updated: 0 } }
    },
  },
}
const cleanup = await def.setup(ctx)
out.cleanup = typeof cleanup
out.hooks = Object.keys(registered).sort()
const base = "You are OpenCode, the best coding agent on the planet."
const request = async (kind, messages, system = base) => {
  const event = { sessionID: session, agent: "build", model: { providerID: "p", id: "m" },
                  system: [{ type: "text", text: system }], messages, options: {}, tools: {} }
  if (kind !== undefined) event.kind = kind
  for (const callback of registered.context ?? []) await callback(event)
  return event.system
}
const user = (text) => ({ role: "user", content: [{ type: "text", text }] })
const first = [user("which package manager do we use")]
out.primary = await request("primary", first)
out.again = await request("primary", [...first, { role: "assistant", content: [
  { type: "text", text: "pnpm" }] }, user("and the API path?")])
out.noKind = await request(undefined, first)
out.title = await request("title", first, "You are a title generator.")
out.compaction = await request("compaction", first)
out.generate = await request("generate", first)
out.sessionGets = asked.length
// 1.x: server() with the same session
const hooks = await def.server({ project: { id: project }, directory, worktree: directory })
await hooks["chat.message"]({ sessionID: session }, { message: {}, parts: [
  { type: "text", text: "which package manager do we use" }] })
const output = { system: [base] }
await hooks["experimental.chat.system.transform"]({ sessionID: session, model: {} }, output)
out.v1 = output.system
process.stdout.write(JSON.stringify(out))
"""


def _seed(cfg: Path, env: dict[str, str], memories: list[Memory]) -> None:
    store = EdgeStore(store_dir(load_config(cfg, env), env))
    try:
        store.upsert(memories)
    finally:
        store.close()


def _idle(cfg: Path, env: dict[str, str]) -> bool:
    from conftest import cli_json

    daemon = cli_json("--config", str(cfg), "status", env=env)["daemon"]
    return bool(daemon and not daemon.get("catching_up") and not daemon.get("pending_count"))


def _run_plugin(file: Path, env: dict[str, str], tmp_path: Path) -> dict[str, object]:
    harness = tmp_path / "harness-v2.mjs"
    harness.write_text(HARNESS)
    done = subprocess.run([NODE or "node", str(harness), file.as_uri(), MAIN, ACME, ACME_KEY],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # the plugin prints nothing
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("daemon_runtime", [True, False],
                         ids=["daemon-in-runtime-dir", "daemon-in-state-dir"])
def test_the_installed_file_meets_the_2x_contract_and_finds_the_socket_at_run_time(
        tmp_path: Path, sample_db: Path, isolated_env: dict[str, str],
        daemon_runtime: bool) -> None:
    cfg = write_config(tmp_path / "cfg.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{sample_db}"]
[extraction]
mode = "rules"
""")
    base = {**isolated_env, "OPENCODE_MEMORYD_CONFIG": str(cfg), "PATH": os.environ["PATH"]}
    # short, as /run/user/<uid> is: a socket path over 100 bytes would be moved to $TMPDIR
    run = Path(tempfile.mkdtemp(prefix="oc-run-", dir="/tmp"))
    with_runtime = {**base, "XDG_RUNTIME_DIR": str(run)}
    # the daemon uses one layout; the file is installed and OpenCode runs with the other
    daemon_env, opencode_env = ((with_runtime, base) if daemon_runtime
                                else (base, with_runtime))
    _seed(cfg, isolated_env, SEED)
    proc = start_daemon(cfg, daemon_env)
    try:
        info = state_dir(load_config(cfg, base), base) / DAEMON_INFO_FILE
        assert wait_until(info.exists, timeout=60)
        assert wait_until(lambda: _idle(cfg, daemon_env), timeout=60)
        sock = Path(json.loads(info.read_text())["socket"])
        assert sock.is_relative_to(run) == daemon_runtime
        install(env=opencode_env, executable="/usr/bin/opencode-memoryd")
        file = plugin_path(opencode_env)
        out = _run_plugin(file, opencode_env, tmp_path)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(run, ignore_errors=True)

    # loaded as 2.x and 1.18.33 load it: the default export alone
    assert out["exports"] == ["default"]
    assert out["v2Shape"] is True and out["v1Shape"] is True
    assert out["id"] == "opencode-memoryd"
    assert out["hooks"] == ["context"] and out["cleanup"] == "undefined"
    # the agent loop's requests get the block, the same bytes every time
    base_part = {"type": "text",
                 "text": "You are OpenCode, the best coding agent on the planet."}
    primary = out["primary"]
    assert isinstance(primary, list) and len(primary) == 2 and primary[0] == base_part
    block = primary[1]["text"]
    assert primary[1] == {"type": "text", "text": block}
    assert block.startswith(MARKER) and "We always use pnpm, never npm." in block
    assert "Other project: uses Go 1.22." not in block
    assert out["again"] == out["noKind"] == primary
    assert out["sessionGets"] == 1  # asked once per session
    # title, compaction and generate requests get nothing
    assert out["title"] == [{"type": "text", "text": "You are a title generator."}]
    assert out["compaction"] == out["generate"] == [base_part]
    # 1.x adds the same bytes for the same session
    assert out["v1"] == [base_part["text"], block]


# 2.x tool hooks (``ctx.tool.hook``, see the module docstring and the plugin's toolNotes):
# each call runs the registered execute.before, then execute.after with the result given;
# prints the results as the hooks left them.
TOOLS_HARNESS = r"""
const [url, session, directory, project] = process.argv.slice(2)
const def = (await import(url)).default
const registered = {}
const register = (prefix) => async (name, callback) => {
  (registered[prefix + name] ??= []).push(callback)
  return { dispose: async () => {} }
}
const ctx = {
  app: { name: "opencode", version: "2.0.32", channel: "latest" },
  options: {},
  session: {
    hook: register("session."),
    get: async ({ sessionID }) => ({ id: sessionID, projectID: project, location: { directory } }),
  },
  tool: { hook: register("tool.") },
}
await def.setup(ctx)
const out = { hooks: Object.keys(registered).sort() }
const call = async (id, tool, input, status, result) => {
  const base = { tool, sessionID: session, agent: "build", messageID: "msg_1", id, input }
  for (const callback of registered["tool.execute.before"] ?? []) await callback({ ...base })
  const after = status === "completed" ? { ...base, status, result }
    : { ...base, status, error: { message: "boom" } }
  for (const callback of registered["tool.execute.after"] ?? []) await callback(after)
  return after.result ?? after.error
}
const migration = (n) => ({ filePath: `${directory}/db/migrations/${n}.sql` })
out.edit = await call("call_1", "edit", migration(3), "completed", { content: "Edit applied." })
out.again = await call("call_2", "edit", migration(4), "completed",
  { content: [{ type: "text", text: "Edit applied." }] })
out.thrown = await call("call_3", "bash", { command: "node a.js" }, "error")
const dockerfile = { filePath: `${directory}/Dockerfile` }
out.thrownRead = await call("call_6", "read", dockerfile, "error")
// (a call whose notes the hooks wait for comes between: the thrown call's ask is answered)
out.failed = await call("call_4", "bash", { command: "node server.js" }, "completed",
  { content: "Error: listen EADDRINUSE :::3000", metadata: { exit: 1 } })
out.read = await call("call_7", "read", dockerfile, "completed", { content: "FROM node:20" })
out.noContent = await call("call_5", "read", { filePath: `${directory}/src/deploy.yaml` },
  "completed", { output: { text: "x" } })
process.stdout.write(JSON.stringify(out))
"""

MIGRATION = "Every migration ships a downgrade."
PORT = "When the dev server says EADDRINUSE, stop the old one with make stop."
DOCKER = "The Dockerfile pins its base image by digest."


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_2x_tool_hooks_add_the_note_to_the_result_content(
        tmp_path: Path, sample_db: Path, isolated_env: dict[str, str]) -> None:
    from test_context import mem

    cfg = write_config(tmp_path / "cfg.toml", f"""
[opencode]
settle_seconds = 0
db_paths = ["{sample_db}"]
[extraction]
mode = "rules"
[context]
max_entries = 1
""")
    env = {**isolated_env, "OPENCODE_MEMORYD_CONFIG": str(cfg), "PATH": os.environ["PATH"]}
    _seed(cfg, isolated_env, [*SEED, mem(MIGRATION, minutes=0), mem(PORT, minutes=-1),
                                 mem(DOCKER, minutes=-2)])
    proc = start_daemon(cfg, env)
    try:
        info = state_dir(load_config(cfg, env), env) / DAEMON_INFO_FILE
        assert wait_until(info.exists, timeout=60)
        install(env=env, executable="/usr/bin/opencode-memoryd")
        harness = tmp_path / "harness-tools.mjs"
        harness.write_text(TOOLS_HARNESS)
        done = subprocess.run([NODE or "node", str(harness), plugin_path(env).as_uri(), MAIN,
                               ACME, ACME_KEY], env=env, capture_output=True, text=True,
                              timeout=120, check=False)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    out = json.loads(done.stdout)
    assert out["hooks"] == ["session.context", "tool.execute.after", "tool.execute.before"]
    # the migration's folder: its rule, after the tool's own text
    edit = out["edit"]["content"]
    assert edit.startswith("Edit applied.\n\n<!-- opencode-memoryd action -->\n")
    assert f'"{MIGRATION}"' in edit and edit.rstrip("\n").endswith("-->")
    # once per session; text parts stay as they were
    assert out["again"] == {"content": [{"type": "text", "text": "Edit applied."}]}
    # a tool that failed with an error is left alone
    assert out["thrown"] == out["thrownRead"] == {"message": "boom"}
    # and the note asked before it is not given: the next call about that file has it
    assert out["read"]["content"].startswith("FROM node:20\n\n<!-- opencode-memoryd action")
    assert f'"{DOCKER}"' in out["read"]["content"]
    # a failed command: its error's past fix, in a text part after its output
    failed = out["failed"]
    assert failed["metadata"] == {"exit": 1}
    assert failed["content"].startswith("Error: listen EADDRINUSE :::3000\n\n")
    assert f'"{PORT}"' in failed["content"]
    # a result without content is not changed
    assert out["noContent"] == {"output": {"text": "x"}}


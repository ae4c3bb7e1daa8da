"""The OpenCode 1.x plugin's notes at tool calls, driven the way OpenCode drives its tool
hooks: the note goes at the end of the tool's output, and the daemon is told (``GET
/v1/action_given`` with the note's closing hash) only for a note that was added: never for
one asked before a tool that then threw (``tool.execute.after`` never runs), nor for one
that came too late."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from conftest import socket_file
from opencode_memoryd.install.opencode import render_plugin
from opencode_memoryd.usecases.action import (
    ACTION_END_PREFIX,
    ACTION_MARKER,
    HEADER,
    note_digest,
)
from opencode_memoryd.usecases.fence import seal

NODE = shutil.which("node")

# A stand-in for Bun's fetch: /v1/action answers NOTE (ERROR_NOTE when asked with an
# error), or never in mode "late"; every call is recorded. Each step prints the tool's
# output as the hooks left it and the calls made during it.
HARNESS = r"""
const calls = []
let mode = "ok"
const alive = setInterval(() => {}, 1000) // as OpenCode's process: the plugin's timers are unref'd
globalThis.Bun = { version: "stand-in" }
globalThis.fetch = async (url, options) => {
  const u = new URL(String(url))
  calls.push(String(url))
  if (u.pathname === "/v1/action_given") return Response.json({ result: { given: true } })
  if (u.pathname !== "/v1/action") return Response.json({ result: { text: "" } })
  if (mode === "late") {
    const late = () => new Error("timeout")
    return new Promise((_, no) => options.signal.addEventListener("abort", () => no(late())))
  }
  const text = u.searchParams.get("error") ? process.env.ERROR_NOTE : process.env.NOTE
  return Response.json({ result: { text } })
}
const plugin = (await import(process.argv[2])).default
const hooks = await plugin.server({ project: { id: "p1" }, directory: "/w/app", worktree: "/w" })
const sessionID = "ses_1"
const step = async (callID, tool, args, result) => {
  const before = calls.length
  await hooks["tool.execute.before"]({ tool, sessionID, callID }, { args })
  let output = null
  if (result !== null) {
    output = { title: "", output: result.output, metadata: result.metadata ?? {} }
    await hooks["tool.execute.after"]({ tool, sessionID, callID, args }, output)
  }
  await new Promise((resolve) => setTimeout(resolve, 50))
  return { output: output?.output ?? null, calls: calls.slice(before) }
}
const migration = { filePath: "/w/app/db/migrations/0002.sql" }
const out = {}
out.edited = await step("call_1", "edit", migration, { output: "Edit applied." })
// the tool threw: OpenCode never runs tool.execute.after
out.thrown = await step("call_2", "edit", migration, null)
out.failed = await step("call_3", "bash", { command: "node server.js" },
  { output: "Error: listen EADDRINUSE :::3000", metadata: { exit: 1 } })
mode = "late"
out.late = await step("call_4", "edit", migration, { output: "Edit applied." })
clearInterval(alive)
process.stdout.write(JSON.stringify(out))
"""


def _note(text: str) -> str:
    return seal([HEADER, "framing", f'- 2026-01-10: "{text}"'], ACTION_MARKER,
                ACTION_END_PREFIX)


def _asked(calls: list[str], path: str) -> list[dict[str, list[str]]]:
    return [parse_qs(urlsplit(c).query) for c in calls if urlsplit(c).path == path]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_only_a_note_added_to_the_tools_output_is_confirmed(tmp_path: Path) -> None:
    socket_file(tmp_path / "run" / "opencode-memoryd" / "control.sock")
    module = tmp_path / "plugin.mjs"
    module.write_text(render_plugin())
    harness = tmp_path / "harness.mjs"
    harness.write_text(HARNESS)
    note = _note("Every migration ships a downgrade.")
    error_note = _note("When the dev server says EADDRINUSE, stop the old one.")
    env = {"PATH": os.environ["PATH"], "NOTE": note, "ERROR_NOTE": error_note,
           "HOME": str(tmp_path / "home"), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    done = subprocess.run([NODE or "node", str(harness), module.as_uri()], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)

    # added at the end of the output, then confirmed with its closing line's hash; the
    # ask names the tool call
    edited = out["edited"]
    assert edited["output"] == f"Edit applied.\n\n{note}"
    assert _asked(edited["calls"], "/v1/action")[0]["call"] == ["call_1"]
    assert _asked(edited["calls"], "/v1/action_given") == [
        {"session": ["ses_1"], "digest": [note_digest(note)]}]
    # asked before a tool that threw: never added, never confirmed
    assert len(_asked(out["thrown"]["calls"], "/v1/action")) == 1
    assert _asked(out["thrown"]["calls"], "/v1/action_given") == []
    # a failed command: both notes of the call added and confirmed, the second asked
    # with the same call id
    failed = out["failed"]
    assert failed["output"] == f"Error: listen EADDRINUSE :::3000\n\n{note}\n{error_note}"
    assert [a["call"] for a in _asked(failed["calls"], "/v1/action")] == [["call_3"]] * 2
    assert sorted(a["digest"][0] for a in _asked(failed["calls"], "/v1/action_given")) == \
        sorted([note_digest(note), note_digest(error_note)])
    # no answer in time: the output is unchanged and nothing is confirmed
    assert out["late"]["output"] == "Edit applied."
    assert _asked(out["late"]["calls"], "/v1/action_given") == []

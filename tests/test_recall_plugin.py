"""The OpenCode 1.x plugin's recall part, driven the way OpenCode drives its hooks: the part
goes into the user message as one synthetic text part (after the user's own parts), never
into the system prompt; only a whole part that came within the bound is added, and only
an added part is confirmed to the daemon."""

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
from opencode_memoryd.usecases.fence import RECALL_END_PREFIX, RECALL_MARKER, seal
from opencode_memoryd.usecases.recall import closing_digest

NODE = shutil.which("node")

# A stand-in for Bun's fetch: /v1/context answers BLOCK, /v1/recall answers PART (or, per
# mode, never, an error, or a changed part), /v1/recall_given is recorded. Prints one JSON
# object per asked message: the parts after chat.message, the system prompt, the calls.
HARNESS = r"""
const calls = []
let mode = "ok"
globalThis.Bun = { version: "stand-in" }
globalThis.fetch = async (url, options) => {
  const path = new URL(String(url)).pathname
  calls.push(String(url))
  if (path === "/v1/context") return Response.json({ result: { text: process.env.BLOCK } })
  if (path === "/v1/recall_given") return Response.json({ result: { given: true } })
  if (mode === "never") {
    const late = () => new Error("timeout")
    return new Promise((_, no) => options.signal.addEventListener("abort", () => no(late())))
  }
  if (mode === "error") return new Response("{}", { status: 500 })
  const changed = process.env.PART.replace("pnpm", "npm")
  if (mode === "tampered") return Response.json({ result: { text: changed } })
  return Response.json({ result: { text: process.env.PART } })
}
const plugin = (await import(process.argv[2])).default
const hooks = await plugin.server({ project: { id: "p1" }, directory: "/w/app", worktree: "/w" })
// an id as OpenCode makes them, a millisecond ago
const opencodeID = () => {
  const stamp = (BigInt(Date.now() - 1) * 4096n + 1n) & 0xffffffffffffn
  return "prt_" + stamp.toString(16).padStart(12, "0") + "AAAAAAAAAAAAAA"
}
const ask = async (sessionID, messageID, text) => {
  const before = calls.length
  const parts = [{ id: opencodeID(), sessionID, messageID, type: "text", text }]
  await hooks["chat.message"]({ sessionID }, { message: { id: messageID, sessionID }, parts })
  const output = { system: ["You are OpenCode."] }
  await hooks["experimental.chat.system.transform"]({ sessionID, model: {} }, output)
  return { parts, system: output.system, calls: calls.slice(before) }
}
const out = {}
out.ok = await ask("s1", "msg_1", "which package manager?")
for (const m of ["never", "error", "tampered"]) {
  mode = m
  out[m] = await ask("s-" + m, "msg_1", "which package manager?")
}
mode = "ok"
out.noText = await ask("s9", "msg_1", "")
await new Promise((resolve) => setTimeout(resolve, 50))  // the confirmation is not awaited
out.confirmed = calls.filter((c) => c.includes("/v1/recall_given"))
process.stdout.write(JSON.stringify(out))
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_part_goes_into_the_user_message_and_only_an_added_part_is_confirmed(
        tmp_path: Path) -> None:
    socket_file(tmp_path / "run" / "opencode-memoryd" / "control.sock")
    module = tmp_path / "plugin.mjs"
    module.write_text(render_plugin())
    harness = tmp_path / "harness.mjs"
    harness.write_text(HARNESS)
    block = seal(["## Memories", '- 2026-01-10: "use pnpm"'])
    part = seal(["## Relevant now", '- 2026-01-10: "We always use pnpm."'], RECALL_MARKER,
                RECALL_END_PREFIX)
    env = {"PATH": os.environ["PATH"], "BLOCK": block, "PART": part,
           "HOME": str(tmp_path / "home"), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    done = subprocess.run([NODE or "node", str(harness), module.as_uri()], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)

    ok = out["ok"]
    # the system prompt holds the block alone
    assert ok["system"] == ["You are OpenCode.", block]
    # the part is one synthetic text part of the message, after the user's own
    said, added = ok["parts"]
    assert added == {"id": added["id"], "sessionID": "s1", "messageID": "msg_1",
                     "type": "text", "text": part, "synthetic": True}
    assert added["id"].startswith("prt_") and len(added["id"]) == len(said["id"])
    assert added["id"] > said["id"]
    # the block is asked first (the part leaves out what it holds), then the part
    paths = [urlsplit(c).path for c in ok["calls"]]
    assert paths[:2] == ["/v1/context", "/v1/recall"]
    assert parse_qs(urlsplit(ok["calls"][1]).query) == {
        "directory": ["/w/app"], "session": ["s1"], "project": ["p1"],
        "message_id": ["msg_1"], "text": ["which package manager?"]}
    # only the added part is confirmed, with its closing line's hash
    assert [parse_qs(urlsplit(c).query) for c in out["confirmed"]] == [
        {"session": ["s1"], "message_id": ["msg_1"], "digest": [closing_digest(part)]}]
    # no answer within the bound, an error or a changed part: the message goes on as it
    # was, and nothing is confirmed
    for mode in ("never", "error", "tampered"):
        assert [p["text"] for p in out[mode]["parts"]] == ["which package manager?"], mode
        assert out[mode]["system"] == ["You are OpenCode.", block], mode
    # a message without text asks nothing
    assert [urlsplit(c).path for c in out["noText"]["calls"]] == ["/v1/context"]
    assert len(out["noText"]["parts"]) == 1

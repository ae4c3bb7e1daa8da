"""Toasts in the genuine OpenCode: once per session the plugin calls ``client.tui.showToast``
with the number of notes in the session's block, and once more when the agent's memory tool
saves a note; ``[context] toasts = false`` turns both off.

Under ``opencode run`` no terminal UI runs: OpenCode's server answers the call and publishes
a ``tui.toast.show`` event on its bus (read in the 1.18.33 binary: ``TuiHttpApi.showToast``
publishes ``ToastShow``). A second plugin, installed beside ours, writes every such event it
is given to a file: what the test reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from .memoryd_side import Memoryd, memory
from .opencode_sandbox import OpenCodeSandbox
from .stub_model import call_tool, reply

pytestmark = pytest.mark.slow

WHEN = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
CONFIG = "[context]\n{toasts}[embedding]\nprovider = \"none\"\n"
LISTENER = r"""
import { appendFileSync } from "node:fs"
export default { id: "toast-listener", server: async () => ({
  event: async ({ event }) => {
    if (event?.type === "tui.toast.show") {
      appendFileSync(process.env.TOAST_LOG, JSON.stringify(event.properties) + "\n")
    }
  },
}) }
"""


@pytest.fixture
def memoryd(opencode_sandbox: OpenCodeSandbox) -> Iterator[Memoryd]:
    sandbox = opencode_sandbox
    pid, root = sandbox.project_id, sandbox.project
    side = Memoryd(sandbox, CONFIG.format(toasts=""))
    side.seed([memory("We're a pnpm shop.", type_="feedback", project=pid, root=root,
                      when=WHEN),
               memory("I prefer answers in British English.", type_="user", scope="user",
                      when=WHEN)])
    side.start()
    side.install_opencode()
    try:
        yield side
    finally:
        side.close()


def toasts(log: Path) -> list[dict[str, object]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_toast_per_session_and_per_saved_note_unless_turned_off(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd, tmp_path: Path) -> None:
    sandbox = opencode_sandbox
    log = tmp_path / "toasts.jsonl"
    sandbox.env["TOAST_LOG"] = str(log)
    sandbox.install_plugin(LISTENER, "toast-listener.js")
    sandbox.script("remember the release day",
                   call_tool("memoryd_memory", mode="add",
                             content="Releases are cut on Thursdays."),
                   reply("Noted."))

    first = sandbox.run("remember the release day")
    sandbox.run("and what else", session=first.session_id)

    tool_results = first.chat_requests[-1].texts("tool")
    assert tool_results and '"status":"added"' in tool_results[0]
    shown = toasts(log)
    # each `opencode run` is an OpenCode process: the session's toast once in each (the
    # second block holds the saved note too)
    assert [t["message"] for t in shown] == ["memory: 2 notes for this project",
                                             "memory: saved a note",
                                             "memory: 3 notes for this project"]
    assert all(t["title"] == "opencode-memoryd" and t["variant"] == "info" for t in shown)

    memoryd.stop()
    memoryd.config_path.write_text(memoryd.config_path.read_text().replace(
        "[context]\n", "[context]\ntoasts = false\n"))
    memoryd.start()
    sandbox.script("remember the freeze",
                   call_tool("memoryd_memory", mode="add",
                             content="The code freeze starts on the 20th."),
                   reply("Noted."))
    off = sandbox.run("remember the freeze")
    assert '"status":"added"' in off.chat_requests[-1].texts("tool")[0]
    assert toasts(log) == shown

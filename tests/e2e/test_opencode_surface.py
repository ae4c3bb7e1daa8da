"""The harness proven with stand-ins: what the genuine OpenCode does with a system-prompt
plugin, a stdio MCP server, and a plugin whose daemon is not there."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from .opencode_sandbox import OpenCodeSandbox
from .stub_model import call_tool, reply

pytestmark = pytest.mark.slow

STANDINS = Path(__file__).parent / "standins"
FIXED_BLOCK = "<sandbox-memory>\nThe project uses pnpm, never npm.\n</sandbox-memory>"


def test_plugin_block_is_in_every_request_of_the_session_but_not_the_title(
        opencode_sandbox: OpenCodeSandbox) -> None:
    sandbox = opencode_sandbox
    sandbox.install_plugin(STANDINS / "fixed_block_plugin.js")

    first = sandbox.run("what package manager do we use")
    second = sandbox.run("and for the lockfile", session=first.session_id)

    assert first.session_id is not None and second.session_id == first.session_id
    assert first.text == "Done." and second.text == "Done."
    chat = first.chat_requests + second.chat_requests
    assert len(chat) == 2
    assert [r.system[1:] for r in chat] == [[FIXED_BLOCK], [FIXED_BLOCK]]
    assert "what package manager" in chat[0].user_text
    assert "and for the lockfile" in chat[1].user_text
    titles = [r for r in sandbox.requests if r.is_title]
    assert len(titles) == 1
    assert all(FIXED_BLOCK not in text for text in titles[0].system)


def test_mcp_server_tool_is_offered_and_its_result_reaches_the_model(
        opencode_sandbox: OpenCodeSandbox, tmp_path: Path) -> None:
    sandbox = opencode_sandbox
    calls = tmp_path / "standin-calls.jsonl"
    sandbox.add_mcp("memoryd", [sys.executable, str(STANDINS / "echo_mcp_server.py")],
                    {"STANDIN_LOG": str(calls)})
    sandbox.script("use the echo tool", call_tool("memoryd_echo", text="pnpm"),
                   reply("The tool answered."))

    result = sandbox.run("please use the echo tool")

    chat = result.chat_requests
    if "memoryd_echo" not in chat[0].tool_names:
        pytest.fail(f"tool not offered; opencode mcp list:\n{sandbox.cli('mcp', 'list').stdout}")
    print("tools offered:", chat[0].tool_names)
    assert len(chat) == 2
    assert any("ECHO-RESULT: pnpm" in text for text in chat[1].texts("tool"))
    assert result.text == "The tool answered."
    logged = [json.loads(line) for line in calls.read_text().splitlines()]
    assert logged == [{"tool": "echo", "arguments": {"text": "pnpm"},
                       "cwd": str(sandbox.project)}]


def test_plugin_answers_without_its_daemon(opencode_sandbox: OpenCodeSandbox,
                                           tmp_path: Path) -> None:
    sandbox = opencode_sandbox
    stale = sandbox.runtime_dir / "memoryd.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(stale))  # bound, never listening, then closed: what a killed daemon leaves
    plugin_log = tmp_path / "plugin.jsonl"
    sandbox.env |= {"MEMORYD_SOCKET": str(stale), "PLUGIN_LOG": str(plugin_log)}
    sandbox.install_plugin(STANDINS / "dead_socket_plugin.js")
    sandbox.script("hello without a daemon", reply("Still here."))

    result = sandbox.run("hello without a daemon")

    assert result.text == "Still here."
    assert [len(r.system) for r in result.chat_requests] == [1]
    fetches = [json.loads(line) for line in plugin_log.read_text().splitlines()]
    assert len(fetches) == 1 and fetches[0]["ok"] is False
    print(f"failed fetch added {fetches[0]['ms']:.1f} ms ({fetches[0]['error']}); "
          f"run took {result.seconds:.1f} s")
    assert fetches[0]["ms"] < 1500

"""`opencode-memoryd install --yes` beside the genuine OpenCode: it lists the MCP server,
LLM mode goes through OpenCode's own provider (the stand-in model) with no key written by
hand, a session's implicit fact is stored and reaches the next session through the plugin,
and `uninstall --purge` takes it all away."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from .memoryd_side import DAEMON_SOURCE, Memoryd
from .opencode_sandbox import OpenCodeSandbox
from .stub_model import ModelRequest, Step, reply

pytestmark = pytest.mark.slow

SAID = "rewrite notes.py to store notes in sqlite"
FACT = "The notes app keeps its notes in SQLite."


def memoryd(sandbox: OpenCodeSandbox, *args: str) -> subprocess.CompletedProcess[str]:
    """This checkout's CLI with the sandbox's environment (no ``--config``: the default
    file, as a user runs it)."""
    return subprocess.run([sys.executable, "-m", "opencode_memoryd", *args],
                          env=sandbox.env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False)


def answer(request: ModelRequest) -> Step:
    """OpenCode's turn gets a plain reply; our extraction request (its transcript quotes the
    message with its id) gets the fact the message implies."""
    found = re.search(r"\[(msg_\w+)\] user: \"?" + re.escape(SAID), request.user_text)
    if found is None:
        return reply("Noted.")
    return reply(json.dumps({"memories": [{"content": FACT, "type": "project",
                                           "scope": "project",
                                           "message_ids": [found.group(1)]}]}))


def test_install_connects_opencode_and_extracts_through_its_model(
        opencode_sandbox: OpenCodeSandbox) -> None:
    sandbox = opencode_sandbox
    sandbox.env["PYTHONPATH"] = str(DAEMON_SOURCE)
    sandbox.write_config()
    done = memoryd(sandbox, "install", "--yes", "--mode", "llm", "--opencode-key")
    assert done.returncode == 0, done.stdout + done.stderr
    sandbox.adopt_config_file()
    config_file = Path(sandbox.env["XDG_CONFIG_HOME"]) / "opencode-memoryd" / "config.toml"
    text = config_file.read_text()
    llm = tomllib.loads(text)["llm"]
    assert (llm["base_url"], llm["model"], llm["api_key_from"]) == (
        sandbox.model.base_url, "stub-small", "opencode:stub")
    assert "stub-key-not-secret" not in text

    listed = sandbox.cli("mcp", "list")
    assert re.search(r"memoryd\b.*connected", listed.stdout, re.IGNORECASE), listed.stdout

    sandbox.script(SAID, answer)
    sandbox.run(SAID)
    # the turn is read at once (not 2 s after it ended)
    config_file.write_text(text.replace("settle_seconds = 2.0", "settle_seconds = 0"))
    done = memoryd(sandbox, "maintain", "--dir", str(sandbox.project))
    assert done.returncode == 0, done.stdout + done.stderr
    ours: list[dict[str, Any]] = [r.body for r in sandbox.requests
                                  if r.body.get("model") == "stub-small"
                                  and "response_format" in r.body]
    assert ours, "no extraction request reached the model"
    keys = {r.headers.get("authorization") for r in sandbox.requests
            if "response_format" in r.body}
    assert keys == {"Bearer stub-key-not-secret"}
    done = memoryd(sandbox, "list", "--dir", str(sandbox.project), "--json")
    assert done.returncode == 0, done.stderr
    assert FACT in [m["content"] for m in json.loads(done.stdout)]

    # the daemon, as the service runs it, gives the next session the fact (the plugin)
    side = Memoryd(sandbox, name="unused")
    side.config_path = config_file
    try:
        side.start()
        later = sandbox.run("what do we store notes in?")
        assert any(FACT in text for text in later.chat_requests[0].system)
        refused = memoryd(sandbox, "uninstall", "--purge", "--yes")
        assert refused.returncode == 6 and "nothing was removed" in refused.stderr
        assert config_file.exists() and sandbox.adopt_config_file()["mcp"]["memoryd"]
    finally:
        side.close()
    done = memoryd(sandbox, "uninstall", "--purge", "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not config_file.exists()
    assert "memoryd" not in json.loads(sandbox.config_file.read_text()).get("mcp", {})

"""Memories reach the agent, in the genuine OpenCode: the plugin's context block, the
``memoryd_memory`` MCP tool, OpenCode without its daemon, and extraction that never mines
what we gave the agent.

Each test runs a real ``opencode-memoryd run`` on a store seeded with memories of the
sandbox's project (its OpenCode project id is the root-commit hash), wires OpenCode up with
the real ``opencode-memoryd install-opencode``, and reads what OpenCode sent to the stand-in
model.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import wait_until
from fake_openai import FakeOpenAI
from opencode_memoryd.install.opencode import render_plugin
from opencode_memoryd.models import Memory

from .memoryd_side import Memoryd, memory
from .opencode_sandbox import OpenCodeSandbox, RunResult
from .stub_model import ModelRequest, Step, call_tool, content_text, reply

pytestmark = pytest.mark.slow

STANDINS = Path(__file__).parent / "standins"
MARKER = "<!-- opencode-memoryd context -->"
TOOL = "memoryd_memory"
WHEN = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
PNPM = "Always use pnpm, never npm, in this repository."
PORT = "The API server listens on port 8787."
# Worded as a directive, so the rules extractor would store "Deploys happen only on
# Tuesdays." if it ever mined the block or a tool result as a user statement.
TUESDAYS = "Remember that deploys happen only on Tuesdays."
BRITISH = "I prefer answers in British English."
ELSEWHERE = "The billing service is written in Go 1.22."
# Added through the tool, worded as a directive for the same reason as TUESDAYS.
STAGING = "Keep in mind that the staging database is called heron-staging."


def seeds(sandbox: OpenCodeSandbox) -> list[Memory]:
    """The store's memories: three of the sandbox project, one user-scope, one of another
    project."""
    pid, root = sandbox.project_id, sandbox.project
    return [
        memory(PNPM, type_="feedback", project=pid, root=root, when=WHEN),
        memory(PORT, project=pid, root=root, when=WHEN),
        memory(TUESDAYS, project=pid, root=root, when=WHEN),
        memory(BRITISH, type_="user", scope="user", when=WHEN),
        memory(ELSEWHERE, project="0" * 40, root="/elsewhere", when=WHEN),
    ]


@pytest.fixture
def memoryd(opencode_sandbox: OpenCodeSandbox) -> Iterator[Memoryd]:
    """A running daemon on a seeded store, installed into the sandbox's OpenCode."""
    side = Memoryd(opencode_sandbox)
    side.seed(seeds(opencode_sandbox))
    side.start()
    side.install_opencode()
    try:
        yield side
    finally:
        side.close()


def block_of(request: ModelRequest) -> str | None:
    """The context block a request carries (a system message starting with the marker)."""
    found = [text for text in request.system if text.startswith(MARKER)]
    assert len(found) <= 1, found
    return found[0] if found else None


def tool_results(request: ModelRequest) -> list[dict[str, Any]]:
    """The results of the ``memoryd_memory`` calls the request carries, in order: the
    tool's JSON, or ``{"text": ...}`` when OpenCode sent something else."""
    calls = {c["id"]: c["function"]["name"] for m in request.messages
             for c in m.get("tool_calls") or []}
    results = []
    for m in request.messages:
        if m.get("role") == "tool" and calls.get(m.get("tool_call_id")) == TOOL:
            text = content_text(m.get("content"))
            try:
                results.append(json.loads(text))
            except ValueError:
                results.append({"text": text})
    return results


def last_result(request: ModelRequest) -> dict[str, Any]:
    """The result of the last ``memoryd_memory`` call the request carries."""
    results = tool_results(request)
    assert results, request.messages
    return results[-1]


def forget_the_first_hit(request: ModelRequest) -> Step:
    """The model's next step: forget the best hit of the search it just made."""
    return call_tool(TOOL, mode="forget", id=last_result(request)["results"][0]["id"])


def test_the_block_is_in_every_request_of_a_session_and_never_in_the_title_request(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd) -> None:
    sandbox = opencode_sandbox

    first = sandbox.run("which package manager should I use here")
    second = sandbox.run("and which port does the API listen on", session=first.session_id)

    assert first.session_id and second.session_id == first.session_id
    chat = first.chat_requests + second.chat_requests
    assert len(chat) == 2 and [len(r.system) for r in chat] == [2, 2]
    block = block_of(chat[0])
    assert block is not None, chat[0].system
    assert block_of(chat[1]) == block  # byte for byte: the cached prefix stays valid
    for text in (PNPM, PORT, TUESDAYS, BRITISH):
        assert f'- 2026-01-10: "{text}"' in block
    assert ELSEWHERE not in block
    # the answer to the first message is in the block once: the block shows it anyway (its
    # conventions), so the task's places go to no other memory
    assert block.count(PNPM) == 1 and "### Relevant to the task" not in block
    # what the daemon serves for that session is what OpenCode sent
    served = memoryd.cli_json("context", "--dir", str(sandbox.project),
                              "--session", first.session_id,
                              "--query", "which package manager should I use here")
    assert served["text"] == block
    titles = [r for r in sandbox.requests if r.is_title]
    assert len(titles) == 1
    assert all(MARKER not in text for text in titles[0].system)


def test_opencode_loads_the_default_export_and_the_plugin_finds_the_socket_at_run_time(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd) -> None:
    sandbox = opencode_sandbox
    # the daemon's socket is in its XDG_RUNTIME_DIR; the file is installed from a shell
    # without one (e.g. after `su -`)
    assert memoryd.socket.is_relative_to(sandbox.runtime_dir)
    memoryd.cli("uninstall-opencode")
    memoryd.env.pop("XDG_RUNTIME_DIR")
    plugin = memoryd.install_opencode()
    text = plugin.read_text()
    assert text == render_plugin()
    # the file's one export is the default { id, server, setup }: a block in the request
    # means 1.18.33 called the default export's server()
    assert re.findall(r"^export\b.*$", text, re.M) == ["export default { id: APP, server, setup }"]
    # OpenCode run with XDG_RUNTIME_DIR, then without it: the block arrives both times
    with_runtime = sandbox.run("which package manager should I use here")
    del sandbox.env["XDG_RUNTIME_DIR"]
    without = sandbox.run("which port does the API listen on")
    for run in (with_runtime, without):
        block = block_of(run.chat_requests[0])
        assert block is not None and PNPM in block, run.chat_requests[0].system


def test_the_memory_tool_searches_adds_and_forgets(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd) -> None:
    sandbox = opencode_sandbox
    ids = {m.content: m.id for m in seeds(sandbox)}
    sandbox.script("look up the package manager",
                   call_tool(TOOL, mode="search", query="package manager pnpm npm"),
                   reply("pnpm it is."))
    sandbox.script("save the staging fact",
                   call_tool(TOOL, mode="add", content=STAGING, type="project"),
                   call_tool(TOOL, mode="search", query="staging database name"),
                   reply("Saved."))
    sandbox.script("drop the port fact",
                   call_tool(TOOL, mode="search", query="which port does the API server use"),
                   forget_the_first_hit,
                   call_tool(TOOL, mode="search", query="staging database name"),
                   forget_the_first_hit,
                   call_tool(TOOL, mode="search", query="staging database name"),
                   reply("Forgotten."))

    looked = sandbox.run("look up the package manager")
    chat = looked.chat_requests
    if TOOL not in chat[0].tool_names:
        pytest.fail(f"{TOOL} not offered; opencode mcp list:\n{sandbox.cli('mcp', 'list').stdout}")
    assert chat[0].tool_names.count(TOOL) == 1
    # the server's instructions reach the system prompt and name the tool as listed
    instructions = chat[0].system[0].split("<mcp_instructions>", 1)[1]
    assert f"Call `{TOOL}` with mode=search" in instructions
    assert block_of(chat[0]) is not None and block_of(chat[1]) == block_of(chat[0])
    found = last_result(chat[1])
    assert found["success"] is True
    best = found["results"][0]
    assert (best["id"], best["content"], best["similarity"]) == (ids[PNPM], PNPM, 100)
    assert {"type", "scope", "createdAt"} <= set(best)
    assert looked.text == "pnpm it is."

    saved = sandbox.run("save the staging fact")
    added, searched = tool_results(saved.chat_requests[-1])
    assert added["success"] is True and added["memory"]["content"] == STAGING
    assert searched["results"][0]["id"] == added["memory"]["id"]
    assert searched["results"][0]["content"] == STAGING

    dropped = sandbox.run("drop the port fact")
    first, refused, own, forgot, again = tool_results(dropped.chat_requests[-1])
    note = added["memory"]["id"]
    assert first["results"][0]["id"] == ids[PORT]
    # the user's memory is the user's to forget; the agent's own note is its to forget
    assert refused["success"] is False and "ask the user" in refused["error"]
    assert own["results"][0]["id"] == note
    assert forgot["success"] is True and forgot["forgotten"]["id"] == note
    assert note not in [hit["id"] for hit in again["results"]]
    assert dropped.text == "Forgotten."
    stored = memoryd.memories()
    assert stored[ids[PORT]]["status"] == "active"
    assert stored[note]["status"] == "retired"
    assert stored[note]["retired_reason"] == "forgotten"
    assert (stored[note]["source"], stored[note]["provenance"]) == ("manual", "agent")
    active = {m["id"] for m in memoryd.cli_json("list")}
    assert ids[PORT] in active and note not in active


def test_the_memory_tool_shows_the_real_session_history(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd) -> None:
    sandbox = opencode_sandbox
    earlier = sandbox.run("how do I run the unit tests")

    def read_it(request: ModelRequest) -> Step:
        listed = last_result(request)["sessions"]
        return call_tool(TOOL, mode="messages", id=listed[-1]["id"])

    sandbox.script("what did we talk about",
                   call_tool(TOOL, mode="sessions"), read_it, reply("We talked about tests."))
    now = sandbox.run("what did we talk about")

    listed, messages = tool_results(now.chat_requests[-1])
    assert listed["success"] is True and messages["success"] is True
    ids = [s["id"] for s in listed["sessions"]]
    assert set(ids) == {earlier.session_id, now.session_id}
    assert ids[-1] == earlier.session_id  # newest first
    assert "how do I run the unit tests" in json.dumps(messages)
    assert now.text == "We talked about tests."


def hook_times(log: Path, run: RunResult) -> list[dict[str, Any]]:
    """The hook timer's lines for ``run``'s chat requests (see ``hook_timer_plugin.js``)."""
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    return [t for t in lines if t["session"] == run.session_id and t["model"] == "stub-coder"]


def test_opencode_answers_when_the_daemon_is_stopped_or_frozen(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd, tmp_path: Path) -> None:
    sandbox = opencode_sandbox
    timer = tmp_path / "hook-timer.jsonl"
    sandbox.config["plugin"] = [(STANDINS / "hook_timer_plugin.js").as_uri()]
    sandbox.env["HOOK_TIMER_LOG"] = str(timer)
    sandbox.script("hello", call_tool(TOOL, mode="search", query="pnpm"), reply("Still here."))
    up = sandbox.run("hello while it runs")
    memoryd.pause()  # SIGSTOP: the socket accepts connections, nobody answers
    try:
        frozen = sandbox.run("hello while it is frozen")
    finally:
        memoryd.resume()
    memoryd.stop()
    stopped = sandbox.run("hello while it is stopped")

    (up_first, up_next), (frozen_first, _), (stopped_first, _) = (
        hook_times(timer, run) for run in (up, frozen, stopped))
    print(f"our system hook on the first request: daemon up {up_first['ms']:.0f} ms "
          f"(next request {up_next['ms']:.0f} ms), frozen {frozen_first['ms']:.0f} ms, "
          f"stopped {stopped_first['ms']:.0f} ms; runs {up.seconds:.1f} s, "
          f"{frozen.seconds:.1f} s, {stopped.seconds:.1f} s")
    # the timer ran before our plugin, which added the block after it
    assert (up_first["before"], up_first["after"]) == (1, 2)
    assert block_of(up.chat_requests[0]) is not None
    assert last_result(up.chat_requests[1])["success"] is True
    for run in (frozen, stopped):
        assert run.text == "Still here."
        assert [len(r.system) for r in run.chat_requests] == [1, 1]  # no block, no error
    # the plugin waits for a frozen daemon (at most 1.5 s) in chat.message, where it asks
    # for the block and the message's recall part; the system prompt's hook then only
    # takes what came (or nothing)
    assert frozen_first["ms"] <= 2000 and stopped_first["ms"] <= 2000
    frozen_error = last_result(frozen.chat_requests[1])
    assert frozen_error["success"] is False and "did not answer" in frozen_error["error"]
    stopped_error = last_result(stopped.chat_requests[1])
    assert stopped_error["success"] is False
    assert "systemctl --user start opencode-memoryd" in stopped_error["error"]
    assert "opencode-memoryd run" in stopped_error["error"]


def test_extraction_stores_nothing_from_the_block_or_the_tool_results(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd) -> None:
    sandbox = opencode_sandbox
    before = memoryd.memories()
    sandbox.script("anything about deploys",
                   call_tool(TOOL, mode="search", query="when do deploys happen"),
                   reply("Found it."))
    sandbox.script("save the staging fact",
                   call_tool(TOOL, mode="add", content=STAGING, type="project"),
                   reply("Saved."))
    asked = sandbox.run("anything about deploys")
    saved = sandbox.run("save the staging fact")
    told = sandbox.run("Remember that the CI runs on Buildkite.")  # the one user directive
    # what extraction must not mine was really there, worded as directives
    assert TUESDAYS in (block_of(asked.chat_requests[0]) or "")
    assert TUESDAYS in json.dumps(last_result(asked.chat_requests[1]))
    added = last_result(saved.chat_requests[1])
    assert added["success"] is True and added["memory"]["content"] == STAGING

    memoryd.cli("maintain", "--dir", str(sandbox.project), "--db", str(sandbox.db_path))

    sessions = {asked.session_id, saved.session_id, told.session_id}
    assert sessions <= memoryd.marked_sessions()  # every session was read
    after = memoryd.memories()
    new = sorted((m["source"], m["content"], m["session_id"])
                 for i, m in after.items() if i not in before)
    assert [n[:2] for n in new] == [("manual", STAGING), ("rules", "The CI runs on Buildkite.")]
    assert new[1][2] == told.session_id
    assert {i: after[i] for i in before} == before  # nothing merged into the old ones


def test_the_extraction_llm_never_sees_the_block_or_the_tool_results(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd, tmp_path: Path) -> None:
    sandbox = opencode_sandbox
    sandbox.script("anything about deploys",
                   call_tool("bash", command="echo other-tool-output", description="Echo"),
                   call_tool(TOOL, mode="search", query="when do deploys happen"),
                   call_tool(TOOL, mode="list"),
                   reply("Found it."))
    asked = sandbox.run("anything about deploys")
    assert TUESDAYS in (block_of(asked.chat_requests[0]) or "")
    assert "other-tool-output" in json.dumps(asked.chat_requests[-1].messages)
    assert all(TUESDAYS in json.dumps(r) for r in tool_results(asked.chat_requests[-1]))
    memoryd.stop()

    with FakeOpenAI() as fake:
        llm = Memoryd(sandbox, mode="llm", name="memoryd-llm", config=f"""
[state]
dir = "{tmp_path / 'llm-state'}"

[qdrant]
path = "{tmp_path / 'llm-store'}"

[llm]
base_url = "{fake.base_url}"
model = "extractor"
max_retries = 0
""")
        llm.cli("maintain", "--dir", str(sandbox.project), "--db", str(sandbox.db_path))
        prompts = json.dumps(fake.chat_requests)

    assert asked.session_id in llm.marked_sessions()
    assert "anything about deploys" in prompts  # the transcript was sent,
    assert "other-tool-output" in prompts  # with other tools' results
    for given in (MARKER, TUESDAYS, "Tuesdays", PNPM, PORT, BRITISH, TOOL):
        assert given not in prompts, given


def test_the_cli_run_from_the_agents_shell_gets_the_agents_limits(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd) -> None:
    sandbox = opencode_sandbox
    ids = {m.content: m.id for m in seeds(sandbox)}
    cli = f"{sys.executable} -m opencode_memoryd --config {memoryd.config_path}"
    shell = (f"{cli} forget {ids[PNPM]}; echo forget-exit=$?; "
             f"{cli} add --user 'I want every answer to start with the word banana.'; "
             f"{cli} add --dir . 'The integration tests need the staging VPN.'")
    sandbox.script("tidy the memories", call_tool("bash", command=shell, description="tidy"),
                   reply("Tidied."))

    tidied = sandbox.run("tidy the memories")

    said = "\n".join(tidied.chat_requests[-1].texts("tool"))
    assert "forget-exit=6" in said and "ask the user" in said and "OPENCODE=1" in said
    stored = {m["content"]: m for m in memoryd.memories().values()}
    assert stored[PNPM]["status"] == "active"
    assert "I want every answer to start with the word banana." in stored, said
    banana = stored["I want every answer to start with the word banana."]
    assert (banana["provenance"], banana["pending"]) == ("agent", True)
    assert "The integration tests need the staging VPN." in stored, said
    vpn = stored["The integration tests need the staging VPN."]
    assert (vpn["provenance"], vpn["project_id"]) == ("agent", sandbox.project_id)
    block = memoryd.cli_json("context", "--dir", str(sandbox.project))["text"]
    assert "banana" not in block and PNPM in block
    assert block.index("VPN") > block.index("### Noted by the agent (unconfirmed)")


def test_a_fact_said_in_one_session_is_in_the_block_of_the_next_one(
        opencode_sandbox: OpenCodeSandbox) -> None:
    """The next session opens while the first one is still in its quiet period (60 s):
    its first block request captures the first session first."""
    sandbox = opencode_sandbox
    side = Memoryd(sandbox, config="[context]\ncapture_first_seconds = 1.0\n")
    side.seed(seeds(sandbox))
    side.start()
    side.install_opencode()
    try:
        told = sandbox.run("Remember that the CI runs on Buildkite.")

        def queued() -> bool:
            pending = side.cli_json("status")["daemon"]["pending"] or []
            return told.session_id in [p["session_id"] for p in pending]

        assert wait_until(queued, timeout=60, interval=0.1)
        assert "The CI runs on Buildkite." not in json.dumps(side.memories())

        asked = sandbox.run("which CI do we use")
        block = block_of(asked.chat_requests[0]) or ""
        assert '"The CI runs on Buildkite."' in block
        assert block_of(asked.chat_requests[-1]) == block
    finally:
        side.close()

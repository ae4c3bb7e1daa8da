"""Notes at tool calls in the genuine OpenCode: before a tool edits a file or runs a command,
and after a command fails, the memories about that file's folder, that program or that error
reach the model at the end of the tool's result in the next step, each once per session; the
tool's own output is unchanged before the note.

A real ``opencode-memoryd run`` on a seeded store, wired up with the real
``install-opencode``; the stand-in model calls the tools and logs every request body.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from .memoryd_side import Memoryd, memory
from .opencode_sandbox import OpenCodeSandbox
from .stub_model import ModelRequest, Step, call_tool, reply

pytestmark = pytest.mark.slow

ACTION = "<!-- opencode-memoryd action -->"
ACTION_END = "<!-- opencode-memoryd action end "
WHEN = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
PNPM = "We're a pnpm shop."
MIGRATION = "Every migration ships a downgrade."
VENV = "A ModuleNotFoundError here means the venv is not active: source .venv/bin/activate."
MAIN = "Never commit directly to main."
# keyword search, recall parts off: only the notes at tool calls carry these memories
CONFIG = ("[context]\nmax_entries = 1\nrelevant_entries = 0\nrecall_entries = 0\n"
          "[embedding]\nprovider = \"none\"\n")
MISSING = "import memoryd_missing_module_x"


@pytest.fixture
def memoryd(opencode_sandbox: OpenCodeSandbox) -> Iterator[Memoryd]:
    sandbox = opencode_sandbox
    pid, root = sandbox.project_id, sandbox.project
    side = Memoryd(sandbox, CONFIG)
    # the block's one entry: the newest convention
    side.seed([memory(MAIN, type_="feedback", project=pid, root=root,
                      when=WHEN + timedelta(days=1)),
               memory(PNPM, type_="project", project=pid, root=root, when=WHEN),
               memory(MIGRATION, type_="project", project=pid, root=root, when=WHEN),
               memory(VENV, type_="reference", project=pid, root=root, when=WHEN)])
    side.start()
    side.install_opencode()
    try:
        yield side
    finally:
        side.close()


def tool_results(request: ModelRequest) -> list[str]:
    """The text of every tool message of a request, in order."""
    return request.texts("tool")


def note_of(result: str) -> str | None:
    """The note at the end of a tool result, or ``None``."""
    if ACTION not in result:
        return None
    note = result[result.index(ACTION):]
    assert note.count(ACTION) == 1 and ACTION_END in note, result
    return note


def test_the_memories_about_a_tool_call_reach_the_model_in_its_step_once(
        opencode_sandbox: OpenCodeSandbox, memoryd: Memoryd) -> None:
    sandbox = opencode_sandbox
    migration = sandbox.project / "db" / "migrations" / "0002_add_users.sql"
    migration.parent.mkdir(parents=True)
    migration.write_text("create table users (id int);\n")
    readme = sandbox.project / "NOTES.txt"
    readme.write_text("notes\n")
    steps: list[Step] = [
        # a file no memory is about: nothing, and the daemon builds its index of the words
        call_tool("read", filePath=str(readme)),
        call_tool("bash", command="npm --version", description="npm version"),
        call_tool("edit", filePath=str(migration), oldString="int", newString="bigint"),
        call_tool("bash", command="npm --version", description="npm version again"),
        call_tool("bash", command=f"python3 -c '{MISSING}'", description="import"),
        reply("done"),
    ]
    sandbox.script("set up the project", *steps)

    run = sandbox.run("set up the project")

    requests = run.chat_requests
    assert len(requests) == 6
    block = "\n".join(requests[0].system)
    assert MAIN in block and PNPM not in block and MIGRATION not in block
    results = tool_results(requests[-1])
    assert len(results) == 5
    assert note_of(results[0]) is None
    results = results[1:]
    notes = [note_of(r) for r in results]
    # npm: what is said of pnpm; the migration's folder: its rule
    assert notes[0] is not None and f'- 2026-01-10: "{PNPM}"' in notes[0]
    assert notes[1] is not None and f'- 2026-01-10: "{MIGRATION}"' in notes[1]
    assert results[1].startswith("Edit applied successfully.")
    # once per session: npm again gets nothing
    assert notes[2] is None
    # the failed command: its output first, then what is said of its error
    assert "ModuleNotFoundError" in results[3] and results[3].index("ModuleNotFoundError") < \
        results[3].index(ACTION)
    assert notes[3] is not None and "ModuleNotFoundError here means the venv" in notes[3]
    # each note reached the model in the step right after its tool, and stays the same
    for i, request in enumerate(requests[2:]):
        assert tool_results(request)[1:] == results[: i + 1]
    # no memory twice, the arguments never in a note
    lines = [line for n in notes if n for line in n.split("\n") if line.startswith("- ")]
    assert len(lines) == len(set(lines)) == 3
    assert not any(MISSING in n or "0002_add_users" in n for n in notes if n)
    assert migration.read_text() == "create table users (id bigint);\n"

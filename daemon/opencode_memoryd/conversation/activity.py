"""What a session did, from its rows: compaction summaries, edited files, failing commands.

Pure logic over :class:`~opencode_memoryd.conversation.rows.MessageRow` values, for the memories
opencode-memoryd writes about sessions (never for user statements):

* **compaction summaries**: the text of each assistant message with ``summary: true`` or
  agent ``compaction`` (a v2 ``compaction`` row with a ``summary`` or ``text`` string);
* **edited files**: the ``filePath`` of each completed ``edit``/``write``/``multiedit`` tool
  call, the ``files`` of each ``patch`` part (the files a step changed, shell commands
  included), in the order first touched;
* **failing commands**: ``bash`` calls that ended with a non-zero ``exit`` (or in ``error``)
  and were not fixed later: no later successful run of the same command, nor of a command
  with the same program and first argument (``pytest tests/a.py`` is fixed by a passing
  ``pytest tests/a.py -x``, not by ``pytest tests/b.py``);
* the **last request**: the human text of the last user message.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opencode_memoryd.conversation.rows import MessageRow, sub_object
from opencode_memoryd.conversation.transcript import (
    OWN_TOOL_PREFIX,
    human_text,
    is_compaction_summary,
)
from opencode_memoryd.injection import instruction_reason, safe_name

#: Tools whose ``filePath`` input is a file they changed.
EDIT_TOOLS = ("edit", "write", "multiedit")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True, slots=True)
class FailedCommand:
    """A shell command that failed and was not fixed later.

    Attributes:
        command: the command as run, whitespace collapsed.
        exit: its exit code, or ``None`` when the tool call itself failed.
        message_id: the assistant message that ran it.
    """

    command: str
    exit: int | None
    message_id: str


@dataclass(slots=True)
class SessionActivity:
    """What a session did (see the module docstring).

    Attributes:
        files: the files it changed, first change first (as OpenCode recorded them:
            usually absolute paths).
        failing: commands that failed and were not fixed later, oldest first.
        last_request: the human text of its last user message (``""``: none).
        last_message_id: its newest message (``""``: no message).
        last_activity_ms: the newest ``time_updated`` of its messages, in ms.
        ended_with_compaction: a compaction summary follows its last human message.
    """

    files: list[str] = field(default_factory=list)
    failing: list[FailedCommand] = field(default_factory=list)
    last_request: str = ""
    last_message_id: str = ""
    last_activity_ms: int = 0
    ended_with_compaction: bool = False

    @property
    def has_state(self) -> bool:
        """Whether there is anything to tell: a changed file or a failing command."""
        return bool(self.files or self.failing)


def summary_text(message: MessageRow) -> str:
    """The text of a compaction summary message, or ``""`` when it is not one."""
    if message.corrupt:
        return ""
    if message.kind == "compaction":
        for key in ("summary", "text"):
            value = message.data.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
        return ""
    if message.role == "user" or not is_compaction_summary(message):
        return ""
    texts = [str(p.data.get("text") or "").strip() for p in message.parts
             if p.data.get("type") == "text" and not p.data.get("synthetic")]
    return "\n".join(t for t in texts if t)


def compaction_summaries(messages: Sequence[MessageRow]) -> list[tuple[MessageRow, str]]:
    """Every compaction summary among ``messages``, in order: ``(message, text)``."""
    out = []
    for m in messages:
        text = summary_text(m)
        if text:
            out.append((m, text))
    return out


def command_key(command: str) -> tuple[str, str]:
    """The program and first argument of a shell command's last ``&&``/``;`` step,
    environment assignments and a leading ``cd`` step left out: what a later run must
    share to count as the same check (``("pytest", "tests/a.py")``)."""
    steps = [s.strip() for s in re.split(r"&&|\|\||;", command) if s.strip()]
    steps = [s for s in steps if not s.startswith("cd ")] or steps
    last = steps[-1] if steps else command
    try:
        words = shlex.split(last)
    except ValueError:
        words = last.split()
    words = [w for w in words if not _ENV.match(w)]
    if not words:
        return ("", "")
    args = [w for w in words[1:] if not w.startswith("-")]
    return (words[0], args[0] if args else "")


def _bash_result(state: Mapping[str, Any]) -> tuple[bool, int | None] | None:
    """``(failed, exit code)`` of a finished bash call; ``None`` while it runs."""
    status = state.get("status")
    if status == "error":
        return True, None
    if status != "completed":
        return None
    code = sub_object(state, "metadata").get("exit")
    if isinstance(code, bool) or not isinstance(code, int):
        return False, None
    return code != 0, code


def session_activity(messages: Sequence[MessageRow]) -> SessionActivity:
    """What the session of ``messages`` (in read order, all of them) did.

    Sub-agent work is in the sub-agent's own session and is not counted here.
    """
    act = SessionActivity()
    files: dict[str, None] = {}
    runs: list[_Run] = []
    last_human = -1
    last_summary = -1
    for i, m in enumerate(messages):
        act.last_message_id = m.id
        act.last_activity_ms = max(act.last_activity_ms, m.time_updated)
        if m.corrupt:
            continue
        if m.role == "user":
            text = human_text(m)
            if text:
                act.last_request, last_human = text, i
        elif summary_text(m):
            last_summary = i
        else:
            for p in m.parts:
                _tool_activity(m.id, p.data, files, runs)
    act.files = list(files)
    act.failing = _unfixed(runs)
    act.ended_with_compaction = last_summary > last_human
    return act


#: One shell run: (command, :func:`command_key`, failed, exit code, message id).
_Run = tuple[str, tuple[str, str], bool, int | None, str]


def _tool_activity(message_id: str, part: Mapping[str, Any], files: dict[str, None],
                   runs: list[_Run]) -> None:
    """Add what one part changed to ``files`` and the shell run it made to ``runs``."""
    kind = part.get("type")
    if kind == "patch":
        for f in part.get("files") or []:
            if isinstance(f, str) and f:
                files.setdefault(f, None)
        return
    tool = str(part.get("tool") or "")
    if kind != "tool" or tool.startswith(OWN_TOOL_PREFIX):
        return
    state = sub_object(part, "state")
    inp = sub_object(state, "input")
    if tool in EDIT_TOOLS and state.get("status") == "completed":
        path = inp.get("filePath") or sub_object(state, "metadata").get("filepath")
        if isinstance(path, str) and path:
            files.setdefault(path, None)
    elif tool == "bash":
        result = _bash_result(state)
        command = " ".join(str(inp.get("command") or "").split())
        if result is not None and command:
            runs.append((command, command_key(command), result[0], result[1], message_id))


def _unfixed(runs: Sequence[_Run]) -> list[FailedCommand]:
    """The failed runs no later run of the same command or key succeeded, the newest run
    of each command only."""
    out: dict[str, FailedCommand] = {}
    for i, (command, key, failed, code, mid) in enumerate(runs):
        if not failed:
            continue
        fixed = any(not f and (c == command or (k == key and key[0]))
                    for c, k, f, _code, _mid in runs[i + 1:])
        if not fixed:
            out.pop(command, None)
            out[command] = FailedCommand(command, code, mid)
    return list(out.values())


def _short(text: str, limit: int) -> str:
    s = " ".join(text.split())
    return s if len(s) <= limit else s[: max(limit - 1, 0)].rstrip() + "…"


def _relative(path: str, root: str | None) -> str:
    if root and root != "/" and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1:]
    return path


def _listed(items: Sequence[str], budget: int, sep: str = ", ") -> str:
    """As many ``items`` as fit ``budget`` characters, then ``and N more``."""
    shown: list[str] = []
    used = 0
    for i, item in enumerate(items):
        rest = len(items) - i - 1
        tail = len(f" and {rest} more") if rest else 0
        if shown and used + len(sep) + len(item) + tail > budget:
            return sep.join(shown) + f" and {len(items) - i} more"
        shown.append(item)
        used += len(item) + (len(sep) if len(shown) > 1 else 0)
    return sep.join(shown)


#: Most characters of the last request and of a command shown in a session's state.
REQUEST_CHARS = 160
COMMAND_CHARS = 120


def shown_request(text: str) -> str:
    """The part of a user's request a session's state may quote: its first line, at most
    :data:`REQUEST_CHARS` characters, and only when it reads as no instruction
    (:func:`~opencode_memoryd.injection.instruction_reason`); ``""`` otherwise. What
    follows the first line is often pasted (a log, a README, an issue) and is not quoted."""
    first = next((x.strip() for x in text.splitlines() if x.strip()), "")
    line = _short(first, REQUEST_CHARS)
    return "" if not line or instruction_reason(line) else line


def shown_command(command: str) -> str:
    """How a shell command may be named in a session's state: the command itself when
    every word of it is a plain name (:func:`~opencode_memoryd.injection.safe_name`: no
    quote, pipe, redirection or prose) and it fits :data:`COMMAND_CHARS`, leading
    environment assignments left out; else its program and first argument
    (:func:`command_key`) when they are plain names; else its program; else ``""``."""
    words = [w for w in command.split() if not _ENV.match(w)]
    line = " ".join(words)
    if words and len(line) <= COMMAND_CHARS and all(safe_name(w) for w in words):
        return line
    program, arg = command_key(command)
    if safe_name(program) and safe_name(arg):
        return f"{program} {arg}"
    return program if safe_name(program) else ""


def render_state(act: SessionActivity, *, title: str, root: str | None,
                 max_chars: int) -> str:
    """The state a session ended in, as one paragraph of at most ``max_chars``
    characters: its last request (:func:`shown_request`), the files it changed (relative
    to ``root`` when inside it) and the commands still failing (:func:`shown_command`);
    ``""`` when it changed nothing and nothing failed. Every name comes from a tool call
    an injected agent could have made, so a file name or command that is not a plain name
    (:func:`~opencode_memoryd.injection.safe_name`) is counted, not shown, and a title
    that reads as an instruction is left out.

    Example: ``Session "Fix date parsing" stopped after the request "make the tests
    pass". Files changed: src/dates.py, tests/test_dates.py. Still failing: `pytest -q`
    (exit 1).``
    """
    if not act.has_state:
        return ""
    named = (title and not title.startswith("New session")
             and not instruction_reason(title) and '"' not in title)
    head = f'Session "{_short(title, 80)}"' if named else "The session"
    request = shown_request(act.last_request)
    out = [f'{head} stopped after the request "{request}".' if request
           else f"{head} stopped here."]
    budget = max(max_chars - len(out[0]) - 40, 60)
    if act.failing:
        cmds = [f"`{shown}` (" + (f"exit {f.exit}" if f.exit is not None else "error") + ")"
                for f in act.failing if (shown := shown_command(f.command))]
        hidden = len(act.failing) - len(cmds)
        if hidden:
            cmds.append(f"{hidden} command{'s' if hidden > 1 else ''} not shown")
        out.append("Still failing: " + _listed(cmds, budget // 2, "; ") + ".")
    if act.files:
        files = [r for f in act.files if safe_name(r := _relative(f, root), max_chars=160)]
        hidden = len(act.files) - len(files)
        if hidden:
            files.append(f"{hidden} file{'s' if hidden > 1 else ''} not shown")
        out.append("Files changed: "
                   + _listed(files, budget - sum(len(x) for x in out[1:])) + ".")
    text = " ".join(out)
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + "…"

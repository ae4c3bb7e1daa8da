"""The words that show a memory's stale marks (:attr:`~opencode_memoryd.models.Memory.stale`,
set by :mod:`opencode_memoryd.dream.freshness`): one phrase for the context block, the CLI,
MCP answers and the page alike.

Pure and import-free, so the CLI's thin client can use it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

#: How each kind of mark says what changed; ``{where}`` is the file that declared it.
CHANGES = {"path": "no longer in the worktree", "dependency": "no longer in {where}",
           "script": "no longer a script of {where}"}


def _same(text: str) -> str:
    return text


def stale_note(marks: Sequence[Mapping[str, object]],
               quote: Callable[[str], str] = _same) -> str:
    """``may be out of date: X changed on DATE (what changed); Y …`` for ``marks``
    (``{"kind", "what", "where", "since"}`` each), or ``""`` when there is none. ``X`` is
    the text the memory names, passed through ``quote`` (the context block quotes it as
    it quotes memory text)."""
    parts = []
    for m in marks:
        change = CHANGES.get(str(m.get("kind")), "changed").format(where=m.get("where") or "?")
        parts.append(f"{quote(str(m.get('what')))} changed on {m.get('since')} ({change})")
    return "may be out of date: " + "; ".join(parts) if parts else ""

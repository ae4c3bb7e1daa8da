"""The rows an OpenCode reader returns: sessions, messages and parts, as plain values.

Every reader of an OpenCode database (the 1.x ``session``/``message``/``part`` tables today)
returns these types, so turns, transcripts and the session processor never see how a row
was stored. Times are integer milliseconds since the Unix epoch, as OpenCode writes them.
``message.data`` and ``part.data`` hold OpenCode's JSON; a row whose JSON cannot be decoded
(not JSON, not an object, or not UTF-8 text) is kept with ``{}`` and flagged ``corrupt``,
never dropped, so a high-water mark can move past it: one bad row costs its own content
only. Text that is not valid UTF-8 arrives from the reader with its bad bytes as lone
surrogates (``surrogateescape``); :func:`is_utf8` tells, :func:`clean_text` repairs names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One row of OpenCode's ``session`` table, with its project.

    Times are integer milliseconds since the Unix epoch, as OpenCode stores them.
    ``worktree`` is the project's root (``/`` for the ``global`` project of non-git folders).
    """

    id: str
    project_id: str
    parent_id: str | None
    directory: str
    title: str
    time_created: int
    time_updated: int
    time_archived: int | None
    worktree: str

    @property
    def archived(self) -> bool:
        """OpenCode leaves ``0`` after an unarchive, so only a positive time counts."""
        return bool(self.time_archived and self.time_archived > 0)

    @property
    def is_subagent(self) -> bool:
        """Sub-agent sessions (task tool) have a parent; their "user" is the parent model."""
        return bool(self.parent_id)

    @property
    def project_key(self) -> str:
        """The memory scope of the session's project.

        A git project is OpenCode's own project id (the hash of the repo's root commit, shared
        by worktrees and clones, unchanged when the repo moves). A folder that is not a git
        repository (OpenCode's ``global`` project) is its own scope: ``dir:<directory>``.
        """
        if self.project_id == "global":
            return f"dir:{self.directory}"
        return self.project_id

    @property
    def project_root(self) -> str:
        """The project's root folder: the git worktree, or the folder itself for non-git."""
        return self.directory if self.project_id == "global" else self.worktree


@dataclass(frozen=True, slots=True)
class PartRow:
    """One row of ``part``: ``data`` is the decoded JSON (``{}`` and ``corrupt`` for a row
    that could not be decoded)."""

    id: str
    data: Mapping[str, Any]
    corrupt: bool = False


@dataclass(slots=True)
class MessageRow:
    """One row of ``message`` with its parts in ``(message_id, id)`` order.

    ``data`` is the decoded JSON; ``corrupt`` is set when it could not be decoded, in which
    case the message is treated as having no content. ``seq`` is the row's SQLite
    ``rowid``: it grows with every insert, whatever clock stamped ``time_created``.
    """

    id: str
    session_id: str
    time_created: int
    time_updated: int
    data: Mapping[str, Any]
    parts: list[PartRow] = field(default_factory=list)
    corrupt: bool = False
    seq: int = 0

    @property
    def role(self) -> str:
        """``user`` or ``assistant`` (``""`` when unknown)."""
        return str(self.data.get("role") or "")

    @property
    def mark(self) -> tuple[int, str]:
        """The message's position for a high-water mark: ``(time_created, id)``."""
        return (self.time_created, self.id)


def is_utf8(text: str) -> bool:
    """Whether ``text`` came from valid UTF-8 (holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean_text(text: str) -> str:
    """``text`` with each byte that was not UTF-8 replaced by U+FFFD (for names and
    folders shown to people; never for ids, which must match the database)."""
    if is_utf8(text):
        return text
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def decode_object(raw: object) -> tuple[dict[str, Any], bool]:
    """Decode a ``data`` column holding a JSON object.

    Args:
        raw: the column's value (``str`` or ``bytes``; anything else is corrupt).

    Returns:
        ``(object, corrupt)``: the decoded object and ``False``, or ``({}, True)`` when the
        value is not UTF-8 text, not JSON or not a JSON object. Never raises.
    """
    if isinstance(raw, str) and not is_utf8(raw):
        return {}, True
    try:
        value = json.loads(raw) if isinstance(raw, str | bytes) else None
    except (ValueError, TypeError):
        return {}, True
    if not isinstance(value, dict):
        return {}, True
    return value, False


def sub_object(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``data[key]`` when it is a JSON object, else an empty mapping (e.g. ``time``, ``state``)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}

"""The rows an OpenCode reader returns: sessions, messages and parts, as plain values.

Every storage of :mod:`opencode_memoryd.source.storages` returns these types, so turns,
transcripts and the session processor never see how a row was stored. Times are integer
milliseconds since the Unix epoch, as OpenCode writes them. ``data`` holds OpenCode's JSON;
a row whose JSON cannot be decoded (not JSON, not an object, nested too deep, or not
UTF-8 text) is kept with ``{}`` and flagged ``corrupt``, never dropped, so a high-water mark
can move past it: one bad row costs its own content only. Text that is not valid UTF-8
arrives from the reader with its bad bytes as lone surrogates (``surrogateescape``);
:func:`is_utf8` tells, :func:`clean_text` repairs names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One session, from OpenCode's ``session`` or ``session_v2`` table, with its project.

    Times are integer milliseconds since the Unix epoch, as OpenCode stores them.
    ``worktree`` is the project's root (``/`` for the ``global`` project of non-git folders).
    ``table`` is the table the row was read from (``session_v2`` wins when both hold the
    session); ``time_idle``/``time_suspended`` exist in ``session_v2`` only (OpenCode 2.x:
    set when the session went idle, and while a turn is claimed or running).
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
    table: str = "session"
    time_idle: int | None = None
    time_suspended: int | None = None

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
    """One row of ``message`` with its parts in ``(message_id, id)`` order, or one row of
    ``session_message`` with its ``content[]`` mapped onto parts.

    ``data`` is the decoded JSON; ``corrupt`` is set when it could not be decoded, in which
    case the message is treated as having no content. ``kind`` (the ``type`` column) and
    ``seq`` are set for ``session_message`` rows only. ``rowid`` is a ``message`` row's
    SQLite rowid: it grows with every insert, whatever clock stamped ``time_created``.
    """

    id: str
    session_id: str
    time_created: int
    time_updated: int
    data: Mapping[str, Any]
    parts: list[PartRow] = field(default_factory=list)
    corrupt: bool = False
    kind: str | None = None
    seq: int | None = None
    rowid: int = 0

    @property
    def role(self) -> str:
        """``user`` or ``assistant`` (``""`` when unknown; a v2 row's ``type`` otherwise)."""
        if self.kind is not None:
            return self.kind
        return str(self.data.get("role") or "")

    @property
    def is_note(self) -> bool:
        """A v2 row that is neither a user prompt nor a model answer (``synthetic``,
        ``system``, ``shell``, ``compaction``, ``*-switched``, ``idle``, unknown kinds): it
        belongs to the turn it follows but never counts as a question or an answer."""
        return self.kind is not None and self.kind not in ("user", "assistant")

    @property
    def mark(self) -> tuple[int, str]:
        """The row's position for a high-water mark: ``(time_created, id)`` in
        ``message``, ``(seq, id)`` in ``session_message``."""
        if self.seq is not None:
            return (self.seq, self.id)
        return (self.time_created, self.id)


def decode_text(raw: bytes) -> str:
    """SQLite TEXT to ``str``, one value at a time (the reader's ``text_factory``): bytes
    that are not UTF-8 become lone surrogates instead of failing the whole query."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "surrogateescape")


def session_from_row(values: Sequence[Any]) -> SessionRow | None:
    """A query row in :class:`SessionRow` order as a session; ``None`` when one of its ids
    is not UTF-8 (it cannot be looked up again). Its folder, title and worktree are
    repaired (:func:`clean_text`)."""
    if not all(is_utf8(v) for v in values[:3] if isinstance(v, str)):
        return None
    row = list(values)
    for i in (3, 4, 8):
        if isinstance(row[i], str):
            row[i] = clean_text(row[i])
    return SessionRow(*row)


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
        value is not UTF-8 text, not JSON, not a JSON object, or nested deeper than the
        decoder can go (:class:`RecursionError` past about 1,000 levels). Never raises.
    """
    if isinstance(raw, str) and not is_utf8(raw):
        return {}, True
    try:
        value = json.loads(raw) if isinstance(raw, str | bytes) else None
    except (ValueError, TypeError, RecursionError):
        return {}, True
    if not isinstance(value, dict):
        return {}, True
    return value, False


def sub_object(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``data[key]`` when it is a JSON object, else an empty mapping (e.g. ``time``, ``state``)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}

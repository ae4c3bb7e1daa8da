"""Planned file changes of the install commands: diffs, reports and atomic replacement.

A command first plans every change (:func:`plan_change`, :func:`unchanged`), which reads
but writes nothing, so that a refusal leaves every file as it was; :func:`carry_out` then
writes the plans (unless it is a dry run) and returns the :class:`InstallReport`.
"""

from __future__ import annotations

import difflib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "Action",
    "FileChange",
    "InstallReport",
    "Plan",
    "carry_out",
    "plan_change",
    "read_text",
    "unchanged",
    "unified_diff",
    "write_atomic",
]

Action = Literal["create", "update", "remove", "unchanged"]


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file a command changed, or would change.

    Attributes:
        path: the file.
        kind: what the file is, e.g. ``"plugin"`` or ``"config"``.
        action: ``"create"``, ``"update"``, ``"remove"`` or ``"unchanged"``.
        diff: a unified diff from the old text to the new one (:func:`unified_diff`);
            empty when unchanged.
        note: why the file was left alone, or empty.
    """

    path: Path
    kind: str
    action: Action
    diff: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class InstallReport:
    """What a command did (or, with ``dry_run``, would do).

    Attributes:
        changes: one entry per file looked at, in the order they were handled.
        dry_run: nothing was written.
    """

    changes: tuple[FileChange, ...]
    dry_run: bool

    @property
    def changed(self) -> bool:
        """Whether any file was (or would be) created, updated or removed."""
        return any(c.action != "unchanged" for c in self.changes)

    @property
    def diff(self) -> str:
        """The diffs of all changes, one after the other."""
        return "".join(c.diff for c in self.changes)


@dataclass(frozen=True, slots=True)
class Plan:
    """A change to make: the report entry, where to write, what, and with which mode.

    Attributes:
        change: the report entry.
        target: the file to write or remove (the target of a symlink that is rewritten).
        new: the new text; ``None`` removes the file (or does nothing when unchanged).
        mode: the permission bits of the written file.
    """

    change: FileChange
    target: Path
    new: str | None
    mode: int


def unchanged(path: Path, kind: str, note: str = "") -> Plan:
    """A plan that leaves ``path`` alone, with an optional ``note`` saying why."""
    return Plan(FileChange(path, kind, "unchanged", note=note), path, None, 0)


def plan_change(path: Path, kind: str, old: str | None, new: str | None) -> Plan:
    """The plan that takes ``path`` from ``old`` to ``new`` (``None``: no file).

    A rewritten symlink keeps pointing where it did: its target is replaced. The new
    file keeps the old one's permission bits, or gets 0644.
    """
    if old == new:
        return unchanged(path, kind)
    action: Action = "create" if old is None else "remove" if new is None else "update"
    target = path.resolve() if path.is_symlink() and new is not None else path
    mode = stat.S_IMODE(os.stat(target).st_mode) if old is not None else 0o644
    return Plan(FileChange(path, kind, action, unified_diff(path, old, new)), target, new, mode)


def carry_out(plans: list[Plan], *, dry_run: bool) -> InstallReport:
    """Write or remove each planned file (nothing with ``dry_run``); report them.

    Raises:
        OSError: a file cannot be written or removed; the files before it are done.
    """
    if not dry_run:
        for plan in plans:
            if plan.change.action == "remove":
                plan.target.unlink(missing_ok=True)
            elif plan.new is not None:
                write_atomic(plan.target, plan.new, plan.mode)
    return InstallReport(tuple(p.change for p in plans), dry_run=dry_run)


def read_text(path: Path) -> str | None:
    """The text of ``path``; ``None`` when missing; undecodable bytes become U+FFFD."""
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` (UTF-8, newlines kept as given) in one rename.

    The text goes to a temporary file in the same folder, is flushed to disk, gets
    ``mode``, and is renamed over ``path``, so a reader sees the old file or the new one,
    never a part. Missing parent folders are created.

    Raises:
        OSError: the folder or the file cannot be written; ``path`` is then untouched.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def unified_diff(path: Path, old: str | None, new: str | None) -> str:
    """A unified diff from ``old`` to ``new`` for ``path``; ``None`` is a missing file.

    A missing side is named ``/dev/null``, as ``diff -N`` does. Every line of the result
    ends with a newline, also when the file's last line has none. Empty when equal.
    """
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
        fromfile="/dev/null" if old is None else str(path),
        tofile="/dev/null" if new is None else str(path))
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)

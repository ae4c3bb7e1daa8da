"""A project's README and manifest files, read from its worktree on this machine, safely.

Only for the project brief. A file is read only when all of these hold:

* the worktree is an existing absolute folder and the top level of a git work tree
  (``git rev-parse --show-toplevel`` names it);
* the file is directly in the worktree under one of the known names (:data:`README_NAMES`,
  :data:`MANIFEST_NAMES`), and is a regular file once symlinks are resolved, and the
  resolved path is still inside the resolved worktree;
* git does not ignore it (``git check-ignore``: a file git tracks is never ignored), neither
  the name in the worktree nor the file a symlink points at;
* at most :data:`MAX_FILE_BYTES` are read.

Anything else (no git, a README outside the worktree, an ignored one, git failing or
timing out) means no file: never an error.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

#: README names, most preferred first (matched case-insensitively).
README_NAMES = ("readme.md", "readme.markdown", "readme.rst", "readme.txt", "readme")
#: Manifest files shown to the model of an LLM brief.
MANIFEST_NAMES = ("package.json", "pyproject.toml", "go.mod", "Cargo.toml")
#: Most bytes read of one file.
MAX_FILE_BYTES = 64 * 1024
#: Seconds one git command may take.
GIT_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class ProjectFile:
    """One file read from a worktree.

    Attributes:
        name: its name in the worktree (``README.md``).
        path: the resolved file.
        text: its text (UTF-8, undecodable bytes replaced), at most
            :data:`MAX_FILE_BYTES` bytes of it.
        sha256: hex digest of the bytes read.
    """

    name: str
    path: Path
    text: str
    sha256: str


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    """Run git in ``root``; ``None`` when git is missing or times out."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_SECONDS, check=False, env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("git_unavailable", root=str(root), error=str(exc))
        return None


def _real_root(worktree: str) -> Path | None:
    """The resolved worktree when it is an existing absolute folder, else ``None``."""
    if not worktree or not os.path.isabs(worktree) or worktree == "/":
        return None
    try:
        root = Path(worktree).resolve(strict=True)
    except OSError:
        return None
    return root if root.is_dir() else None


def _inside(root: Path, name: str) -> tuple[Path, Path] | None:
    """``(path in the worktree, resolved file)`` when ``name`` is a regular file inside
    ``root`` once symlinks are resolved."""
    link = root / name
    try:
        real = link.resolve(strict=True)
    except OSError:
        return None
    if not real.is_relative_to(root) or not real.is_file():
        return None
    return link, real


def _read(name: str, real: Path) -> ProjectFile | None:
    try:
        with real.open("rb") as f:
            data = f.read(MAX_FILE_BYTES)
    except OSError:
        return None
    return ProjectFile(name, real, data.decode("utf-8", errors="replace"),
                       hashlib.sha256(data).hexdigest())


def find_readme(worktree: str) -> ProjectFile | None:
    """The worktree's README, read (symlinks resolved and kept inside; see the module
    docstring), without asking git yet: :func:`shareable` must say yes before its text is
    used. ``None`` when there is none."""
    root = _real_root(worktree)
    if root is None:
        return None
    try:
        names = {e.name.lower(): e.name for e in os.scandir(root)}
    except OSError:
        return None
    for wanted in README_NAMES:
        name = names.get(wanted)
        if name is None:
            continue
        found = _inside(root, name)
        if found is not None:
            return _read(name, found[1])
    return None


def shareable(worktree: str, files: list[ProjectFile]) -> bool:
    """Whether ``worktree`` is the top level of a git work tree and git ignores none of
    ``files`` (by their name in the worktree or the file they resolve to)."""
    root = _real_root(worktree)
    if root is None:
        return False
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or top.returncode != 0:
        return False
    try:
        if Path(top.stdout.strip()).resolve() != root:
            return False
    except OSError:
        return False
    paths = sorted({str(p) for f in files for p in (root / f.name, f.path)})
    if not paths:
        return True
    ignored = _git(root, "check-ignore", "--", *paths)
    # 0: one is ignored; 1: none is; 128 (or anything else): git failed, so no
    return ignored is not None and ignored.returncode == 1


def find_manifests(worktree: str) -> list[ProjectFile]:
    """The manifest files (:data:`MANIFEST_NAMES`) directly in the worktree, read under the
    same rules as the README (symlinks resolved and kept inside), without asking git yet:
    :func:`shareable` must say yes before their text is used."""
    root = _real_root(worktree)
    if root is None:
        return []
    out = []
    for name in MANIFEST_NAMES:
        found = _inside(root, name)
        f = _read(name, found[1]) if found is not None else None
        if f is not None:
            out.append(f)
    return out


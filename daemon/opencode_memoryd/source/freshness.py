"""What a project's worktree holds now and held at an earlier commit: paths, dependencies
and scripts, read-only, for the freshness check of dreams.

The known files (:mod:`~opencode_memoryd.source.manifests`) are read directly in the
worktree and, for monorepos and workspaces, in its tracked subfolders up to
:data:`MAX_DEPTH` levels down (``packages/web/package.json``, ``crates/core/Cargo.toml``),
leaving out folders of vendored, generated, test and example code (:data:`SKIPPED_DIRS`):
a dependency that moved from the root manifest into a workspace package is still declared.

Read-only and runs nothing of the project: files are read (regular files, symlinks
resolved and kept inside the worktree, at most :data:`MAX_FILE_BYTES` each) and
git is asked only plumbing questions (``rev-parse``, ``rev-list``, ``ls-tree``,
``cat-file``) with optional locks off and ``core.fsmonitor`` off, so no hook, filter or
helper of the repository runs. A worktree that is not an existing absolute folder at the
top level of a git work tree is :func:`open_worktree` ``None``: unknown.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import structlog

from opencode_memoryd.source.manifests import LOCKFILES, Names, is_known, names_of

log = structlog.get_logger(__name__)

#: Most bytes read of one manifest, lockfile or task file (a larger one is unknown).
MAX_FILE_BYTES = 8 * 1024 * 1024
#: Seconds one git command may take.
GIT_TIMEOUT_SECONDS = 10.0
#: Deepest known file read, in path components (``a/b/package.json`` is 3).
MAX_DEPTH = 3
#: Folders whose manifests are not the project's own (vendored, generated, test data,
#: examples); a file under one of them is never read.
SKIPPED_DIRS = frozenset({
    ".git", "node_modules", "vendor", "third_party", "target", "dist", "build", "out",
    "test", "tests", "testdata", "fixtures", "__fixtures__", "example", "examples", "docs",
})


def _scanned(rel: str) -> bool:
    """Whether ``rel`` (a ``/``-separated path relative to the worktree) is a known file
    this module reads: a known name, at most :data:`MAX_DEPTH` deep, outside
    :data:`SKIPPED_DIRS`."""
    parts = rel.split("/")
    return (len(parts) <= MAX_DEPTH and is_known(parts[-1])
            and not any(p in SKIPPED_DIRS or p.startswith(".") for p in parts[:-1]))


def _git(root: Path, *args: str, stdin: bytes | None = None
         ) -> subprocess.CompletedProcess[bytes] | None:
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0")
    try:
        return subprocess.run(["git", "-c", "core.fsmonitor=false", "-C", str(root), *args],
                              input=stdin, capture_output=True, timeout=GIT_TIMEOUT_SECONDS,
                              check=False, env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("git_unavailable", root=str(root), error=str(exc))
        return None


@dataclass(frozen=True, slots=True)
class Declared:
    """What the known files of a tree declare (:mod:`~opencode_memoryd.source.manifests`).

    Attributes:
        files: the file's path relative to the worktree (``package.json``,
            ``packages/web/package.json``) -> its names, or ``None`` when it is there but
            could not be read or parsed (unknown).
    """

    files: dict[str, Names | None]

    def where(self, name: str, kind: str, *, lockfiles: bool = True) -> list[str]:
        """The files declaring ``name`` (a normalised dependency for ``kind``
        ``dependency``, a script for ``script``), manifests before lockfiles;
        ``lockfiles=False`` leaves lockfiles out."""
        found = [f for f, n in self.files.items() if n is not None
                 and (lockfiles or _base(f) not in LOCKFILES)
                 and name in (n.deps if kind == "dependency" else n.scripts)]
        return sorted(found, key=lambda f: (_base(f) in LOCKFILES, f.count("/"), f))

    def unknown(self) -> bool:
        """Whether a known file could not be read or parsed."""
        return any(n is None for n in self.files.values())


def _base(rel: str) -> str:
    return rel.rpartition("/")[2]


class Worktree:
    """A git worktree on this machine; build with :func:`open_worktree`.

    Args:
        root: the resolved worktree (the top level of its git work tree).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._tracked: dict[str, dict[str, bool]] = {}
        self._blobs: dict[tuple[str, str], Names | None] = {}
        self._history: list[tuple[int, str]] | None = None

    def rev_at(self, when: datetime) -> str | None:
        """The newest commit of ``HEAD`` committed at or before ``when`` (what ``git
        rev-list -1 --before=WHEN HEAD`` names; the history is read once per worktree);
        ``None`` when there is none or git fails."""
        if self._history is None:
            out = _git(self.root, "rev-list", "--timestamp", "HEAD")
            self._history = []
            if out is not None and out.returncode == 0:
                for line in out.stdout.decode("ascii", "replace").splitlines():
                    ts, _, rev = line.partition(" ")
                    if ts.isdigit() and rev:
                        self._history.append((int(ts), rev))
        limit = when.timestamp()
        return next((rev for ts, rev in self._history if ts <= limit), None)

    def tracked_at(self, rev: str, paths: list[str]) -> set[str]:
        """Those of ``paths`` (relative, normalised; files or folders) tracked at commit
        ``rev`` (answers kept per commit; :meth:`prefetch` asks for many at once)."""
        self.prefetch([(rev, p) for p in paths])
        known = self._tracked.get(rev, {})
        return {p for p in paths if known.get(p)}

    def prefetch(self, pairs: list[tuple[str, str]]) -> None:
        """Ask git once (``cat-file --batch-check``) whether each ``(commit, path)`` not
        asked yet was tracked; a failure leaves them unknown (asked again next time)."""
        todo = [(rev, p) for rev, p in dict.fromkeys(pairs)
                if p not in self._tracked.get(rev, {}) and "\n" not in p]
        if not todo:
            return
        out = _git(self.root, "cat-file", "--batch-check",
                   stdin="".join(f"{rev}:{p}\n" for rev, p in todo).encode())
        lines = (out.stdout.decode("utf-8", "replace").splitlines()
                 if out is not None and out.returncode == 0 else [])
        if len(lines) == len(todo):
            for (rev, p), line in zip(todo, lines, strict=True):
                self._tracked.setdefault(rev, {})[p] = not line.endswith(" missing")

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` (relative, normalised) is in the worktree now (a broken
        symlink counts as there)."""
        return os.path.lexists(self.root / rel)

    def declared_at(self, rev: str) -> Declared:
        """What the known files of the worktree (see the module docstring) declared at
        commit ``rev`` (a file's names are parsed once per content: lockfiles seldom
        change between two commits)."""
        out = _git(self.root, "ls-tree", "-r", "-z", rev)
        files: dict[str, Names | None] = {}
        if out is None or out.returncode != 0:
            return Declared({"": None})
        for entry in out.stdout.split(b"\0"):
            meta, _, raw = entry.partition(b"\t")
            name = raw.decode("utf-8", "surrogateescape")
            kind_sha = meta.split()
            if len(kind_sha) != 3 or kind_sha[1] != b"blob" or not _scanned(name):
                continue
            sha = kind_sha[2].decode("ascii", "replace")
            if (name, sha) not in self._blobs:
                blob = _git(self.root, "cat-file", "blob", sha)
                ok = blob is not None and blob.returncode == 0 and len(
                    blob.stdout) <= MAX_FILE_BYTES
                self._blobs[name, sha] = (names_of(_base(name),
                                                   blob.stdout.decode("utf-8", "replace"))
                                          if ok and blob is not None else None)
            files[name] = self._blobs[name, sha]
        return Declared(files)

    def declared_now(self) -> Declared:
        """What the known files of the worktree declare now: those directly in it
        (tracked or not) and the tracked ones of its subfolders (``git ls-files``; see the
        module docstring)."""
        files: dict[str, Names | None] = {}
        try:
            entries = sorted(e.name for e in os.scandir(self.root))
        except OSError:
            return Declared({"": None})
        for name in entries:
            if is_known(name):
                files[name] = self._read(name)
        out = _git(self.root, "ls-files", "-z")
        if out is None or out.returncode != 0:
            return Declared({**files, "": None})
        for raw in out.stdout.split(b"\0"):
            rel = raw.decode("utf-8", "surrogateescape")
            if "/" in rel and _scanned(rel) and os.path.lexists(self.root / rel):
                files[rel] = self._read(rel)
        return Declared(files)

    def _read(self, name: str) -> Names | None:
        try:
            real = (self.root / name).resolve(strict=True)
            if not real.is_relative_to(self.root) or not real.is_file():
                return None
            with real.open("rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
        if len(data) > MAX_FILE_BYTES:
            return None
        return names_of(_base(name), data.decode("utf-8", "replace"))


def open_worktree(path: str | None) -> Worktree | None:
    """The worktree at ``path`` when it is an existing absolute folder (not ``/``) at the
    top level of a git work tree; else ``None`` (unknown: missing, unreadable, not git)."""
    if not path or not os.path.isabs(path) or path == "/":
        return None
    try:
        root = Path(path).resolve(strict=True)
    except OSError:
        return None
    if not root.is_dir():
        return None
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or top.returncode != 0:
        return None
    try:
        if Path(top.stdout.decode("utf-8", "surrogateescape").strip()).resolve() != root:
            return None
    except OSError:
        return None
    return Worktree(root)

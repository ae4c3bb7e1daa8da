"""Freshness against the code: a memory that names a path, a dependency or a script the
project's worktree no longer has is marked *may be out of date*, at dream time.

For each active fact of a project (:func:`check_freshness`), against the worktree its
memory was written in (``Memory.project_root``: OpenCode's project worktree, or the
session's folder), read-only (:mod:`opencode_memoryd.source.freshness`):

1. the commit the worktree's ``HEAD`` had when the memory was said (``Memory.said``) is
   what the project held then; none (no git, no commit yet, a worktree missing or
   unreadable) means *unknown*: nothing is marked or cleared;
2. a candidate (:func:`~opencode_memoryd.dream.mentions.mentions`) is judged only when that
   commit held it: a path tracked then, a dependency a manifest or lockfile declared then
   (a plain word: a manifest, never a lockfile alone), a script ``package.json``,
   ``pyproject.toml``, a ``Makefile`` or ``justfile`` declared then; so a word that only
   looks like a path or a package is never a false alarm;
3. it is *stale* when the worktree has it no more: the path is gone, no manifest or lockfile
   declares the dependency, no file declares the script. A file of the worktree that cannot
   be read or parsed makes dependencies and scripts unknown.

The mark is the payload field ``stale``: a list of ``{"kind": "path"|"dependency"|
"script", "what": <as the memory writes it>, "where": <the file that declared it, "" for
a path>, "since": <YYYY-MM-DD>}``. ``since`` is the day (UTC) a check first saw it gone:
the exact time of the change is not known (a file's mtime changes with any edit, and an
uncommitted removal has no commit), so the mark keeps the first day it was seen and never
moves it while the thing stays gone. The next dream that finds the thing back clears the
mark. A memory is never retired for being stale, and the mark is a payload-only write
(``updated_at`` is left alone, so it neither opens the dream gate nor reorders the block).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from opencode_memoryd.dream.mentions import mentions
from opencode_memoryd.models import Memory
from opencode_memoryd.source.freshness import Declared, Worktree, open_worktree
from opencode_memoryd.source.manifests import norm_dep

log = structlog.get_logger(__name__)

#: Marks shown per memory at most.
MAX_MARKS = 5


@dataclass
class FreshnessReport:
    """What one check did. Attributes: ``checked`` (memories judged against a worktree),
    ``unknown`` (memories whose worktree or commit was unknown), ``marked`` and ``cleared``
    (memory ids whose mark was set or changed, and removed), ``stale`` (memories marked
    after the check)."""

    checked: int = 0
    unknown: int = 0
    marked: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)
    stale: int = 0

    def to_dict(self) -> dict[str, int]:
        """Counts for the journal: ``{"checked", "unknown", "marked", "cleared", "stale"}``."""
        return {"checked": self.checked, "unknown": self.unknown,
                "marked": len(self.marked), "cleared": len(self.cleared), "stale": self.stale}


class _Tree:
    """One worktree's answers, cached for the memories of a check."""

    def __init__(self, wt: Worktree, root: str) -> None:
        self.wt = wt
        self.roots = (str(wt.root), root.rstrip(os.sep) or os.sep)
        self.now: Declared = wt.declared_now()
        self._then: dict[str, Declared] = {}

    def then(self, rev: str) -> Declared:
        if rev not in self._then:
            self._then[rev] = self.wt.declared_at(rev)
        return self._then[rev]

    def gone(self, paths: Iterable[str]) -> dict[str, str]:
        """Those of ``paths`` (as written) inside the worktree and not in it now, with
        their relative form."""
        rels = {p: rel for p in paths if (rel := self.relative(p)) is not None}
        return {p: rel for p, rel in rels.items() if not self.wt.exists(rel)}

    def relative(self, path: str) -> str | None:
        """``path`` relative to the worktree, normalised; ``None`` when it leaves it."""
        if os.path.isabs(path):  # the worktree as resolved, or as OpenCode wrote it
            root = next((r for r in self.roots if path.startswith(r + os.sep)), None)
            if root is None:
                return None
            path = path[len(root):]
        rel = os.path.normpath(path.lstrip("/"))
        return None if rel == "." or rel == ".." or rel.startswith("../") else rel


def marks_for(memory: Memory, tree: _Tree, rev: str) -> list[dict[str, str]]:
    """The stale marks of ``memory`` against ``tree`` whose commit when it was said is
    ``rev``, ``since`` left empty (see the module docstring)."""
    found: list[dict[str, str]] = []
    said = mentions(memory.content)
    gone = tree.gone(said.paths)
    tracked = tree.wt.tracked_at(rev, list(gone.values())) if gone else set()
    found += [{"kind": "path", "what": p, "where": ""} for p, rel in gone.items()
              if rel in tracked]
    if tree.now.unknown():
        return found[:MAX_MARKS]
    then = tree.then(rev)
    checks = [("dependency", d, norm_dep(d), True) for d in said.deps]
    checks += [("dependency", w, norm_dep(w), False) for w in said.words]
    checks += [("script", s, s, True) for s in said.scripts]
    seen: set[tuple[str, str]] = set()
    for kind, what, name, lockfiles in checks:
        was = then.where(name, kind, lockfiles=lockfiles)
        if was and (kind, name) not in seen and not tree.now.where(name, kind):
            seen.add((kind, name))
            found.append({"kind": kind, "what": what, "where": was[0]})
    return found[:MAX_MARKS]


def _dated(new: list[dict[str, str]], old: list[dict[str, str]], today: str
           ) -> list[dict[str, str]]:
    """``new`` with each ``since`` kept from the same mark in ``old``, else ``today``."""
    first = {(m.get("kind"), m.get("what")): m.get("since") or today for m in old}
    return [dict(m, since=first.get((m["kind"], m["what"])) or today) for m in new]


def check_freshness(memories: Iterable[Memory], now: datetime,
                    set_stale: Callable[[str, list[dict[str, str]]], None],
                    open_tree: Callable[[str | None], Worktree | None] = open_worktree,
                    should_stop: Callable[[], bool] = lambda: False) -> FreshnessReport:
    """Mark or clear the stale marks of ``memories`` (a project's active facts).

    Args:
        memories: the memories to check; a user-scope one, or one without a
            ``project_root``, is unknown.
        now: the current aware UTC time (its day is ``since`` of a new mark).
        set_stale: writes a memory's new marks (``[]`` clears them); called only for
            memories whose marks change.
        open_tree: opens a worktree (:func:`~opencode_memoryd.source.freshness.open_worktree`).
        should_stop: asked before each memory; true ends the check there (what it wrote
            stays: each memory's marks are written whole, and the next dream goes on).

    Returns:
        The :class:`FreshnessReport`.

    Raises:
        Whatever ``set_stale`` raises (``StoreError``); reading the worktree never raises.
    """
    report = FreshnessReport()
    trees: dict[str, _Tree | None] = {}
    today = now.date().isoformat()
    judged: list[tuple[Memory, _Tree | None, str | None]] = []
    for m in memories:
        root = m.project_root if m.scope == "project" else None
        if root is not None and root not in trees:
            wt = open_tree(root)
            trees[root] = _Tree(wt, root) if wt is not None else None
        tree = trees.get(root) if root is not None else None
        rev = tree.wt.rev_at(m.said) if tree is not None else None
        judged.append((m, tree, rev))
    for tree in {id(t): t for _, t, _ in judged if t is not None}.values():
        # one git call for every path of the check that is gone now
        tree.wt.prefetch([(rev, rel) for m, t, rev in judged if t is tree and rev
                          for rel in tree.gone(mentions(m.content).paths).values()])
    for m, tree, rev in judged:
        if should_stop():
            break
        if tree is None or rev is None:
            report.unknown += 1
            report.stale += bool(m.stale)
            continue
        report.checked += 1
        marks = _dated(marks_for(m, tree, rev), m.stale, today)
        if marks != m.stale:
            set_stale(m.id, marks)
            (report.marked if marks else report.cleared).append(m.id)
        report.stale += bool(marks)
    log.info("freshness_checked", **report.to_dict())
    return report

"""The capture runner: due sessions → read-ahead → process → commit when due.

Both ways sessions are captured go through :class:`CaptureRunner`: ``maintain`` (every
session of a database in turn, :mod:`opencode_memoryd.usecases.maintain`) and the daemon's
worker (the due sessions of its queue, a round at a time,
:mod:`opencode_memoryd.serve.runtime.jobs`). The runner reads ahead for a window of sessions at
once (:class:`ReadAhead`: their newest rows in OpenCode's database, their marks and outbox
items in the state file), hands each session with its processor to the caller's step
(what the caller decides around it: locks, the LLM gate, the queue), and commits the
write group when it is due (:meth:`~opencode_memoryd.capture.batching.WriteGroup.commit_if_due`).
Processors come from the composition root's factory
(:meth:`~opencode_memoryd.compose.App.session_processor`), one per database and run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from opencode_memoryd.errors import SourceError

if TYPE_CHECKING:
    from opencode_memoryd.capture.batching import WriteGroup
    from opencode_memoryd.capture.processor import SessionProcessor
    from opencode_memoryd.models import Mark
    from opencode_memoryd.source.reader import OpenCodeDB

log = structlog.get_logger(__name__)

#: A session of one database: ``(source_id, session_id)``.
Key = tuple[str, str]
#: Builds the processor of one database, writing to the runner's group's batch.
ProcessorFor = Callable[["OpenCodeDB"], "SessionProcessor"]
#: The open database of a source id, or ``None`` (it is gone, or not open yet).
SourceOf = Callable[[str], "OpenCodeDB | None"]


class ReadAhead:
    """Reads for a window of sessions at once: their newest rows in OpenCode's database
    (one statement per database), their marks and outbox items into the group's batch
    (read again after a group commit, which forgets what the batch held).

    Args:
        group: the write group whose batch holds the state reads.
        keys: the sessions, in the order they are worked.
        source_of: the open database of a source id.
        window: sessions read at once.
    """

    def __init__(self, group: WriteGroup, keys: Sequence[Key], source_of: SourceOf,
                 window: int) -> None:
        self.group, self.keys, self.source_of, self.window = group, keys, source_of, window
        self._until, self._commits = 0, -1
        self._ends: dict[str, dict[str, Mark]] = {}

    def ends(self, i: int) -> dict[str, Mark] | None:
        """The newest rows, by session id, of ``keys[i]``'s database, read at most
        ``window`` sessions ago (``None`` when that read failed: each session looks itself
        up); call with the index of each session in turn."""
        if i >= self._until:
            self._until = i + self.window
            self._ends = {}
            for source_id, ids in _by_source(self.keys[i:self._until]).items():
                db = self.source_of(source_id)
                if db is None:
                    continue
                try:
                    self._ends[source_id] = db.last_messages(ids)
                except Exception as exc:  # each session looks itself up, and fails alone
                    if not isinstance(exc, SourceError):
                        log.warning("read_ahead_failed", error=f"{type(exc).__name__}: {exc}")
            self._commits = -1
        if self._commits != self.group.commits:
            for source_id, ids in _by_source(self.keys[i:self._until]).items():
                self.group.batch.prefetch(source_id, ids)
            self._commits = self.group.commits
        return self._ends.get(self.keys[i][0])


def _by_source(keys: Iterable[Key]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for source_id, session_id in keys:
        out.setdefault(source_id, []).append(session_id)
    return out


@dataclass
class Step:
    """One session handed to the caller: its key, the newest rows of its database read
    ahead (``None``: look it up), and its database's processor (built on first use)."""

    key: Key
    ends: dict[str, Mark] | None
    runner: CaptureRunner

    def processor(self) -> SessionProcessor:
        """The processor of this session's database.

        Raises:
            SourceError: the database is not open (any more).
        """
        return self.runner.processor(self.key[0])


@dataclass
class RunReport:
    """What a run did: sessions handed to the step, group commits made, and whether it
    stopped before the end (``should_stop``)."""

    visited: int = 0
    commits: int = 0
    stopped: bool = False


class CaptureRunner:
    """Runs sessions through their processors in one write group.

    Args:
        group: the write group (open) the sessions' writes go to.
        processor_for: builds a database's processor (writing to ``group.batch``).
        source_of: the open database of a source id.
        window: sessions read ahead at once.
        should_stop: asked before each session; ``True`` ends the run (the rest stays
            for later).
        before: called with each session's key before its reads and its step (the daemon
            lets a command go first).
        after: called with each session's key after its step.
    """

    def __init__(self, group: WriteGroup, processor_for: ProcessorFor, source_of: SourceOf,
                 *, window: int, should_stop: Callable[[], bool] = lambda: False,
                 before: Callable[[Key], None] | None = None,
                 after: Callable[[Key], None] | None = None) -> None:
        self.group, self.processor_for, self.source_of = group, processor_for, source_of
        self.window, self.should_stop = window, should_stop
        self.before, self.after = before, after
        self._procs: dict[str, SessionProcessor] = {}

    def processor(self, source_id: str) -> SessionProcessor:
        """The processor of ``source_id``'s database (one per run).

        Raises:
            SourceError: the database is not open (any more).
        """
        proc = self._procs.get(source_id)
        if proc is None:
            db = self.source_of(source_id)
            if db is None:
                raise SourceError(f"the OpenCode database {source_id} is not open")
            proc = self._procs[source_id] = self.processor_for(db)
        return proc

    def run(self, keys: Sequence[Key], step: Callable[[Step], None], *,
            order: Iterable[int] | None = None,
            flush_seconds: float | None = None) -> RunReport:
        """Hand each session of ``keys`` to ``step``, reading ahead, and commit the group
        when due after each.

        Args:
            keys: the sessions, in the order they are worked.
            step: processes one session (its writes go to the group's batch).
            order: the indices of ``keys`` in turn (default: all; a progress bar wraps
                them).
            flush_seconds: passed to
                :meth:`~opencode_memoryd.capture.batching.WriteGroup.commit_if_due`.

        Raises:
            Whatever ``step`` or a group commit raises (the sessions before it are done).
        """
        report = RunReport()
        commits = self.group.commits
        ahead = ReadAhead(self.group, keys, self.source_of, self.window)
        try:
            for i in order if order is not None else range(len(keys)):
                if self.should_stop():
                    report.stopped = True
                    break
                key = keys[i]
                if self.before is not None:
                    self.before(key)
                step(Step(key, ahead.ends(i), self))
                report.visited += 1
                if self.after is not None:
                    self.after(key)
                self.group.commit_if_due(flush_seconds=flush_seconds)
        finally:
            report.commits = self.group.commits - commits
        return report

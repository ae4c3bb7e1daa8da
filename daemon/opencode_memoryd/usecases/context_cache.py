"""The context block served from memory: what the daemon keeps between context requests.

The OpenCode plugin asks for a session's block once per OpenCode process, and every
process of a session (``opencode run --session`` starts a new one) asks again; each ask
waits before the first model request. So the daemon keeps, between requests:

* its own read-only connections to OpenCode's databases (:class:`SourcePool`; opening one
  detects its schema, which costs more than the look-ups themselves);
* per session id, what the block needs of the session (whether it is a sub-agent, its
  first user message): fixed once the session and that message exist;
* per folder, its OpenCode project keys, until a database is written
  (``PRAGMA data_version`` of the pool's connections);
* the block itself, per request, until the store is written (its ``generation``) or a
  database is; a repeated request is a dictionary look-up.

Only for a store this process writes alone (``store.single_writer``: the embedded store,
owned by the daemon): a shared server store is read on every request (the connections and
the session facts are kept all the same).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opencode_memoryd.errors import SourceError
from opencode_memoryd.store.api import MemoryFilter, MemoryStore
from opencode_memoryd.usecases.context import (
    ScrollCache,
    SessionFacts,
    agents_notes,
    build_context,
    candidate_pool,
    project_keys,
    read_session_facts,
)
from opencode_memoryd.usecases.ports import AppPort

if TYPE_CHECKING:
    from opencode_memoryd.source.reader import OpenCodeDB

#: The most context blocks kept (least recently asked for dropped first).
MAX_BLOCKS = 256
#: The most session and folder look-ups kept.
MAX_LOOKUPS = 4096


class SourcePool:
    """Long-lived read-only connections to OpenCode's databases, one per path.

    Thread-safe (each :class:`OpenCodeDB` serialises its own statements). A database that
    cannot be opened is retried on the next call.
    """

    def __init__(self, app: AppPort) -> None:
        self._app = app
        self._lock = threading.Lock()
        self._open: dict[Path, OpenCodeDB] = {}

    def databases(self) -> list[OpenCodeDB]:
        """The open databases among the configured or discovered paths (none when no
        database is found; one that cannot be opened is left out)."""
        try:
            paths = self._app.database_paths()
        except SourceError:
            return []
        out = []
        with self._lock:
            for path in paths:
                db = self._open.get(path)
                if db is None:
                    try:
                        db = self._app.open_source(path)
                    except SourceError:
                        continue
                    self._open[path] = db
                out.append(db)
        return out

    def stamp(self) -> tuple[tuple[str, int], ...]:
        """``(path, PRAGMA data_version)`` of each database: changes whenever OpenCode
        commits to one (or a database appears or goes); a database whose schema changed
        is read again."""
        out = []
        for db in self.databases():
            try:
                version = db.data_version()
                db.refresh_schema()
            except SourceError:
                self._drop(db)
                version = -1
            out.append((str(db.path), version))
        return tuple(out)

    def _drop(self, db: OpenCodeDB) -> None:
        with self._lock:
            if self._open.get(db.path) is db:
                del self._open[db.path]
        db.close()

    def close(self) -> None:
        """Close every connection."""
        with self._lock:
            dbs, self._open = list(self._open.values()), {}
        for db in dbs:
            db.close()


class Lru:
    """A small least-recently-used mapping (not thread-safe: the caller locks)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._size:
            self._data.popitem(last=False)


class ContextCache:
    """The daemon's context use case with its look-ups and blocks kept (see the module).

    Args:
        app: settings and adapter factories.
        store: the open memory store.

    Thread-safe: requests that miss are built one at a time.
    """

    def __init__(self, app: AppPort, store: MemoryStore) -> None:
        self._app = app
        self._store = store
        self._single = bool(getattr(store, "single_writer", False))
        self._scroll = ScrollCache(store) if self._single else None
        self.pool = SourcePool(app)
        self._lock = threading.Lock()
        self._blocks = Lru(MAX_BLOCKS)
        self._facts = Lru(MAX_LOOKUPS)
        self._dirs = Lru(MAX_LOOKUPS)
        self._served = Lru(MAX_LOOKUPS)  # session -> ids of every block served to it
        self._agents = Lru(MAX_LOOKUPS)  # scopes -> (store generation, agent's notes)
        self._stamp: tuple[tuple[str, int], ...] = ()

    def context(self, *, directory: str | None, session: str | None, project: str | None,
                query: str | None) -> dict[str, Any]:
        """The block as :meth:`ContextBlock.to_dict
        <opencode_memoryd.usecases.context.ContextBlock.to_dict>` and ``toasts`` (``[context]
        toasts``: whether the plugin shows its toasts), a new dict each time."""
        key = (directory, session, project, query)
        with self._lock:
            stamp = self.pool.stamp()
            generation = int(getattr(self._store, "generation", -1))
            if self._single:
                hit = self._blocks.get(key)
                if hit is not None and hit[0] == (generation, stamp):
                    return dict(hit[1], toasts=self._app.config.context.toasts)
            self._stamp = stamp
            block = build_context(self._app, self._store, directory=directory,
                                  project=project, session=session, query=query,
                                  scroll=self._scroll, facts_of=self._session_facts,
                                  keys_of_dir=self._dir_keys).to_dict()
            if self._single and int(getattr(self._store, "generation", -1)) == generation:
                self._blocks.put(key, ((generation, stamp), block))
            if session:
                ids = {i for section in block["sections"].values() for i in section}
                self._served.put(session, (self._served.get(session) or frozenset()) | ids)
        # the plugin's switch for its toasts ("memory: 8 notes for this project")
        return dict(block, toasts=self._app.config.context.toasts)

    def block_ids(self, *, directory: str | None, session: str,
                  project: str | None) -> set[str]:
        """The ids of every block served to ``session`` (the block is built, or read
        from the cache, when none was served since the daemon started)."""
        with self._lock:
            served = self._served.get(session)
        if served is None:
            self.context(directory=directory, session=session, project=project, query=None)
            with self._lock:
                served = self._served.get(session) or frozenset()
        return set(served)

    def first_message_pending(self, session: str) -> bool:
        """Whether OpenCode's database has ``session`` but no user message of it yet: the
        message the plugin asks about (before OpenCode saves it) is the session's first,
        which the block's "relevant to the task" section answers. ``False`` for a session
        no database knows."""
        with self._lock:
            if self._session_facts(session).first_message:
                return False
            for db in self.pool.databases():
                try:
                    if db.session(session) is not None:
                        return True
                except SourceError:
                    continue
        return False

    def scope(self, *, directory: str | None, session: str, project: str | None
              ) -> tuple[list[MemoryFilter], int] | None:
        """What a search for ``session`` covers: ``(filters, agent's notes among them)``,
        the filters being its projects' and the user's scope; ``None`` for a sub-agent
        session (its parent has the memories)."""
        with self._lock:
            self._stamp = self.pool.stamp()
            if self._session_facts(session).is_subagent:
                return None
            keys = project_keys(self._app, self._store, directory, project,
                                keys_of_dir=self._dir_keys)
        user_flt = MemoryFilter(scope="user", user_id=self._app.user_id)
        flts = [MemoryFilter(project_id=k, include_user_scope=False) for k in keys]
        flts.append(user_flt)
        generation = int(getattr(self._store, "generation", -1))
        with self._lock:
            hit = self._agents.get(tuple(flts)) if self._single else None
        if hit is not None and hit[0] == generation:
            return flts, int(hit[1])
        scroll = self._scroll or self._store.scroll
        pool = self._scroll.pool(flts) if self._scroll else candidate_pool(scroll, flts)
        count = agents_notes(pool, scroll, user_flt)
        with self._lock:
            self._agents.put(tuple(flts), (generation, count))
        return flts, count

    def _session_facts(self, session_id: str) -> SessionFacts:
        """A session's facts; kept once they cannot change any more (a sub-agent, or a
        session whose first user message is written)."""
        facts = self._facts.get(session_id)
        if facts is None:
            facts = read_session_facts(self.pool.databases(), session_id)
            if facts.is_subagent or facts.first_message:
                self._facts.put(session_id, facts)
        return facts  # type: ignore[no-any-return]

    def _dir_keys(self, directory: str) -> set[str]:
        """A folder's OpenCode project keys, kept until a database is written."""
        hit = self._dirs.get(directory)
        if hit is not None and hit[0] == self._stamp:
            return set(hit[1])
        keys: set[str] = set()
        for db in self.pool.databases():
            try:
                keys.update(s.project_key
                            for s in db.sessions(directory=directory, include_subagents=True))
            except SourceError:
                continue
        self._dirs.put(directory, (self._stamp, frozenset(keys)))
        return keys

    def close(self) -> None:
        """Close the pool's database connections."""
        self.pool.close()

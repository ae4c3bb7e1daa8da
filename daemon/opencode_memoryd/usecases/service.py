"""The use cases bound to open resources: one object the CLI, the daemon's control server and
the MCP server all call.

:class:`Service` holds the state file, the store and the dream journal, and builds the extractor
and the dream engine on first use (an LLM client is only imported when needed). :func:`open_local`
opens one for a one-shot command; the daemon builds one over the resources it owns, with its
per-project locks. It implements the service contract
(:class:`~opencode_memoryd.usecases.contract.UseCases`): every route method takes keyword
arguments of JSON types and returns JSON-safe data, so the control socket carries each call
unchanged (:data:`~opencode_memoryd.usecases.contract.ROUTES`, :func:`call`).
"""

from __future__ import annotations

import builtins
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import structlog

from opencode_memoryd.config.paths import normalize_dir
from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.errors import RequestError
from opencode_memoryd.models import iso_utc
from opencode_memoryd.state.db import StateDB
from opencode_memoryd.store.api import MemoryStore
from opencode_memoryd.usecases import (
    agent_limits,
    browse,
    confirm,
    curate,
    dreams,
    edit,
    history,
    integrity,
    memories,
    migrations,
    profile,
    status,
)
from opencode_memoryd.usecases.action import ActionRecall
from opencode_memoryd.usecases.context_cache import ContextCache
from opencode_memoryd.usecases.contract import GET_ROUTES, ROUTES, UseCases
from opencode_memoryd.usecases.data_routes import DataRoutes
from opencode_memoryd.usecases.maintain import LockFor, Progress, capture_now, maintain, no_lock
from opencode_memoryd.usecases.manual_log import journal_undone, journaled, manual_journal
from opencode_memoryd.usecases.plugin_routes import PluginRoutes
from opencode_memoryd.usecases.ports import AppPort
from opencode_memoryd.usecases.projects import resolve_dir
from opencode_memoryd.usecases.recall import RecallCache

if TYPE_CHECKING:
    from datetime import datetime

    # imported where used: the daemon serves commands before it loads the capture code
    from opencode_memoryd.capture.notes import Summarizer
    from opencode_memoryd.capture.processor import Extractor
    from opencode_memoryd.dream.dreamer import Dreamer

log = structlog.get_logger(__name__)

class Service(PluginRoutes, DataRoutes):
    """The use cases over one set of open resources.

    Args:
        app: settings and adapter factories (the composition root).
        state: the open state file.
        store: the open memory store.
        extractor: the extractor to use; built from ``app`` on first use when ``None``.
        summarizer: writes session summaries and briefs; built on first use when ``None``.
        lock_for: per-project lock factory (the daemon's; no locking for one-shot commands).
        progress: wraps each database's session list in ``maintain`` (a progress bar).
        daemon_status: the running daemon's own status, merged into :meth:`status` as
            ``daemon``; ``None`` reports ``{"running": False}``.

    On construction, the store's data migrations it has not had run once and are recorded
    (:func:`~opencode_memoryd.usecases.migrations.migrate_store_data`): user-scope memories
    written before user identities existed become this user's, and memories written before
    sections existed get one; nothing more than reading the store's metadata once done.
    """

    def __init__(self, app: AppPort, state: StateDB, store: MemoryStore, *,
                 extractor: Extractor | None = None, lock_for: LockFor = no_lock,
                 progress: Progress | None = None,
                 daemon_status: Callable[[], dict[str, Any]] | None = None,
                 summarizer: Summarizer | None = None) -> None:
        self.app = app
        self.state = state
        self.store = store
        self.journal = DreamJournal(app.journal_path)
        self.manual_journal = manual_journal(app.journal_path)
        self.lock_for = lock_for
        self.progress = progress
        self.daemon_status = daemon_status
        self._extractor = extractor
        self._summarizer = summarizer
        self._building = threading.Lock()  # one extractor, summarizer, dreamer each
        # OpenCode connections, session look-ups and blocks kept between context requests
        self._context = ContextCache(app, store)
        self._recall = RecallCache(app, self._context, store, state.recall)
        actions = ActionRecall(self._context, store, shared=self._recall)
        self.action, self.action_given = actions.action, actions.confirm
        self._dreamer: Dreamer | None = None
        self._fresh_at: dict[str, datetime] = {}  # project -> its last freshness check
        migrations.migrate_store_data(store, app.user_id, lock_for)

    @property
    def extractor(self) -> Extractor:
        """The extractor of the configured mode (built on first use)."""
        with self._building:
            if self._extractor is None:
                self._extractor = self.app.build_extractor(modes=self.state.llm)
            return self._extractor

    @property
    def summarizer(self) -> Summarizer:
        """The writer of session summaries and project briefs (built on first use)."""
        with self._building:
            if self._summarizer is None:
                self._summarizer = self.app.build_summarizer(modes=self.state.llm,
                                                             replies=self.state.replies)
            return self._summarizer

    @property
    def dreamer(self) -> Dreamer:
        """The consolidation engine: LLM plans in llm mode, duplicate collapse in rules
        mode (built on first use)."""
        with self._building:
            if self._dreamer is None:
                from opencode_memoryd.dream.dreamer import Dreamer
                from opencode_memoryd.dream.model import DreamSettings

                cfg = self.app.config
                settings = DreamSettings(
                    max_retire_share=cfg.dream.max_retire_share,
                    near_duplicate_similarity=cfg.dedup.near_duplicate_similarity,
                    max_output_tokens=cfg.llm.max_output_tokens,
                )
                self._dreamer = Dreamer(self.store, self.state,
                                        planner=self.app.build_planner(modes=self.state.llm),
                                        settings=settings, clock=self.app.clock,
                                        user_id=self.app.user_id)
            return self._dreamer

    # -- the routes -------------------------------------------------------------------

    def maintain(self, *, directory: str | None, db: str | None = None,
                 retry_failed: bool = False) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.maintain.maintain`."""
        if not isinstance(retry_failed, bool):
            raise RequestError("maintain: `retry_failed` must be true or false")
        return maintain(self.app, self.state, self.store, self.extractor,
                        directory=directory, db=db, progress=self.progress,
                        lock_for=self.lock_for, retry_failed=retry_failed,
                        summarizer=self.summarizer)

    def list(self, *, user: bool = False, directory: str | None = None,
             db: str | None = None, include_retired: bool = False
             ) -> builtins.list[dict[str, Any]]:
        """See :func:`opencode_memoryd.usecases.memories.list_memories`."""
        return memories.list_memories(self.app, self.store, user=user, directory=directory,
                                      db=db, include_retired=include_retired)

    def search(self, *, query: str, directory: str | None = None, db: str | None = None,
               limit: int = 10, include_retired: bool = False, project: str | None = None
               ) -> builtins.list[dict[str, Any]]:
        """See :func:`opencode_memoryd.usecases.memories.search`."""
        return memories.search(self.app, self.store, query, directory=directory, db=db,
                               limit=limit, include_retired=include_retired,
                               project=project)

    def show(self, *, memory_id: str) -> dict[str, Any] | None:
        """See :func:`opencode_memoryd.usecases.memories.show_memory`."""
        return memories.show_memory(self.store, self.journal, memory_id, self.app.user_id)

    def status(self) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.status.status_info`; plus ``daemon``."""
        info = status.status_info(self.app, self.state, self.store)
        info["daemon"] = self.daemon_status() if self.daemon_status else {"running": False}
        return info

    def integrity(self) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.integrity.store_integrity`."""
        return integrity.store_integrity(self.state, self.store)

    def dream(self, *, project_key: str | None = None, project_root: str | None = None,
              dry_run: bool = False, caller: str = "user") -> dict[str, Any]:
        """A forced dream of one scope (``project_key`` ``None``: the user scope) under its
        lock; returns its journal entry. The agent may only dry-run (``refuse_agent_dream``)."""
        if not dry_run:
            agent_limits.refuse_agent_dream(caller, "dream")
        return dreams.run_dream(self.dreamer, self.journal, project_key, project_root,
                                trigger="forced", dry_run=dry_run, lock_for=self.lock_for,
                                freshness=self.app.config.dream.check_freshness)

    def undo(self, *, run_id: str, caller: str = "user") -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.dreams.undo_dream` (never the agent's)."""
        agent_limits.refuse_agent_dream(caller, "undo")
        entry = dreams.undo_dream(self.dreamer, self.journal, self.state, run_id,
                                  lock_for=self.lock_for)
        journal_undone(self.manual_journal, self.store, run_id, iso_utc(self.app.clock()))
        return entry

    def add(self, *, content: str, type: str, scope: str, directory: str | None = None,
            db: str | None = None, project: str | None = None,
            caller: str = "user") -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.curate.add_memory` (``caller``: ``user``
        or ``agent``, see :mod:`~opencode_memoryd.usecases.agent_limits`)."""
        agent = agent_limits.check_caller(caller, "add")
        if agent:
            agent_limits.agent_project_keys((), directory, "add")
        result = self._journaled("add", curate.add_memory(
            self.app, self.store, content=content, type_=type, scope=scope,
            directory=directory, db=db, project=project, lock_for=self.lock_for,
            agent=agent, state=self.state))
        for retired in self.store.get(result["superseded"]):  # a rebuild keeps them retired
            self._journaled("supersede", {"memory": retired.to_payload()})
        return result

    def _agent(self, caller: str, directory: str | None, db: str | None, verb: str
               ) -> agent_limits.AgentCall | None:
        """The limits of an agent's call (``None`` for the user's)."""
        if not agent_limits.check_caller(caller, verb):
            return None
        keys = agent_limits.agent_project_keys(
            resolve_dir(self.app, self.store, directory, db).projects if directory else (),
            directory, verb)
        return agent_limits.AgentCall(
            keys, str(directory),
            agent_limits.forget_budget(self.state.agent.spend_agent_forget, self.app.clock))

    def forget(self, *, memory_id: str, caller: str = "user", directory: str | None = None,
               db: str | None = None) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.curate.forget_memory` (the agent's folder)."""
        agent = self._agent(caller, directory, db, "forget")
        return self._journaled("forget", curate.forget_memory(
            self.app, self.store, memory_id, lock_for=self.lock_for, agent=agent))

    def restore(self, *, memory_id: str, caller: str = "user", directory: str | None = None,
                db: str | None = None) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.curate.restore_memory`."""
        agent = self._agent(caller, directory, db, "restore")
        return self._journaled("restore", curate.restore_memory(
            self.app, self.store, memory_id, lock_for=self.lock_for, agent=agent))

    def edit(self, *, memory_id: str, content: str | None = None, type: str | None = None,
             caller: str = "user", directory: str | None = None, db: str | None = None
             ) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.edit.edit_memory`."""
        agent = self._agent(caller, directory, db, "edit")
        return self._journaled("edit", edit.edit_memory(
            self.app, self.store, self.journal, memory_id, content=content, type_=type,
            lock_for=self.lock_for, agent=agent))

    def confirm(self, *, memory_id: str, reject: bool = False, caller: str = "user"
                ) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.confirm.confirm_memory`."""
        return self._journaled("reject" if reject is True else "confirm",
                               confirm.confirm_memory(
            self.app, self.store, memory_id, reject=reject is True,
            agent=agent_limits.check_caller(caller, "confirm"), lock_for=self.lock_for))

    def pending(self) -> builtins.list[dict[str, Any]]:
        """See :func:`opencode_memoryd.usecases.confirm.pending_memories`."""
        return confirm.pending_memories(self.app, self.store)

    def _journaled(self, op: str, result: dict[str, Any]) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.manual_log.journaled`."""
        return journaled(self.manual_journal, op, result, iso_utc(self.app.clock()))

    def browse(self, *, project: str | None = None, scope: str | None = None,
               type: str | None = None, status: str = "active", text: str | None = None,
               offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.browse.browse_memories`."""
        return browse.browse_memories(self.app, self.store, project=project, scope=scope,
                                      type_=type, status=status, text=text, offset=offset,
                                      limit=limit)

    def projects(self) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.browse.list_projects`."""
        return browse.list_projects(self.app, self.store)

    def stats(self) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.browse.store_stats`."""
        return browse.store_stats(self.app, self.store, self.journal)

    def journal_page(self, *, project: str | None = None, user: bool = False,
                     offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.browse.journal_page`."""
        return browse.journal_page(self.journal, project=project, user=user, offset=offset,
                                   limit=limit)

    def profile(self) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.profile.user_profile`."""
        return profile.user_profile(self.app, self.store)

    def resolve(self, *, directory: str, db: str | None = None) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.projects.resolve_dir` (``as_dict``)."""
        return resolve_dir(self.app, self.store, directory, db).as_dict()

    def capture_now(self, *, directory: str) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.maintain.capture_now`."""
        return capture_now(self.app, self.state, self.store, self.extractor,
                           directory=normalize_dir(directory), lock_for=self.lock_for,
                           summarizer=self.summarizer)

    def history_sessions(self, *, directory: str, limit: int = 20, db: str | None = None
                         ) -> builtins.list[dict[str, Any]]:
        """See :func:`opencode_memoryd.usecases.history.sessions`."""
        return history.sessions(self.app, directory=directory, limit=limit, db=db)

    def history_messages(self, *, session_id: str, offset: int = 0, limit: int = 50,
                         db: str | None = None) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.history.messages`."""
        return history.messages(self.app, session_id=session_id, offset=offset,
                                limit=limit, db=db)

    def history_search(self, *, query: str, directory: str, limit: int = 20,
                       db: str | None = None) -> builtins.list[dict[str, Any]]:
        """See :func:`opencode_memoryd.usecases.history.search`."""
        return history.search(self.app, query=query, directory=directory, limit=limit, db=db)

    def history_compactions(self, *, session_id: str, db: str | None = None) -> dict[str, Any]:
        """See :func:`opencode_memoryd.usecases.history.compactions`."""
        return history.compactions(self.app, session_id=session_id, db=db)

    # -- not routes -------------------------------------------------------------------

    def migrate_user_scope(self) -> int:
        """See :func:`opencode_memoryd.usecases.migrations.migrate_user_scope`."""
        return migrations.migrate_user_scope(self.store, self.app.user_id, self.lock_for)

    def migrate_sections(self) -> int:
        """See :func:`opencode_memoryd.usecases.migrations.migrate_sections`."""
        return migrations.migrate_sections(self.store)

    def close(self) -> None:
        """Close the OpenCode connections kept between calls (not the state or store)."""
        self._context.close()

    def recover_dreams(self) -> builtins.list[str]:
        """See :func:`opencode_memoryd.usecases.dreams.recover_dreams`; then journal the
        edits a crash interrupted (:func:`~opencode_memoryd.usecases.edit.recover_edits`)."""
        recovered = dreams.recover_dreams(self.dreamer, self.journal)
        edit.recover_edits(self.store, self.journal)
        return recovered

    def dream_open_scopes(self, *, trigger: str, should_stop: Callable[[], bool]
                          ) -> builtins.list[dreams.ScopeDream]:
        """See :func:`opencode_memoryd.usecases.dreams.dream_open_scopes`."""
        return dreams.dream_open_scopes(self.app, self.dreamer, self.journal, self.store,
                                        trigger=trigger, lock_for=self.lock_for,
                                        should_stop=should_stop, fresh_at=self._fresh_at)


def call(service: Service, route: str, payload: Mapping[str, Any]) -> Any:
    """Call the use case ``route`` with a JSON payload's keys as keyword arguments.

    Raises:
        RequestError: an unknown route, an unknown key, or a required key missing.
    """
    if route not in ROUTES:
        raise RequestError(f"no such use case: {route}")
    method = getattr(service, route)
    params = inspect.signature(method).parameters
    unknown = sorted(set(payload) - set(params))
    if unknown:
        raise RequestError(f"{route}: unknown field(s): {', '.join(unknown)}")
    missing = [n for n, p in params.items()
               if p.default is inspect.Parameter.empty and n not in payload]
    if missing:
        raise RequestError(f"{route}: `{missing[0]}` is required")
    return method(**payload)


if TYPE_CHECKING:
    #: the local implementation satisfies the contract (mypy checks it here)
    _LOCAL: type[UseCases] = Service

__all__ = ["GET_ROUTES", "ROUTES", "Service", "call", "open_local"]


@contextmanager
def open_local(app: AppPort, *, progress: Progress | None = None) -> Iterator[Service]:
    """Open the state file and the store for a one-shot command; close both on exit.

    Raises:
        StateError, StoreError: the state file or the store cannot be opened (the
            embedded store is held by another process: :class:`StoreInUseError`).
    """
    state = app.open_state()
    try:
        store = app.open_store()
        try:
            service = Service(app, state, store, progress=progress)
            try:
                yield service
            finally:
                service.close()
        finally:
            store.close()
    finally:
        state.close()

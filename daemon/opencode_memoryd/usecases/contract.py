"""The service contract: every use case the daemon serves, declared once, typed.

:class:`UseCases` is what the command line, the MCP tool and the web API call. Two
implementations satisfy it: :class:`~opencode_memoryd.usecases.service.Service` (local, over
open resources) and :func:`~opencode_memoryd.usecases.routed.routed` (remote: each method
becomes one request ``(route, payload)`` to the daemon's control socket, or to the daemon's
own service for the MCP host). The wire's route table, :data:`ROUTES`, is generated from
the Protocol: a route is a method name, its payload the method's keyword arguments, its
result the method's (JSON types both ways).

Results are JSON objects (``dict[str, Any]``) whose keys each use case documents.
"""

from __future__ import annotations

import builtins
from types import FunctionType
from typing import Any, Protocol


class UseCases(Protocol):
    """The use cases, in the order the control socket lists them. Each method's keyword
    arguments are the route's payload; each raises the
    :class:`~opencode_memoryd.errors.MemorydError` its implementation documents
    (:class:`~opencode_memoryd.errors.RequestError` for a bad payload,
    :class:`~opencode_memoryd.errors.NotFoundError`, :class:`~opencode_memoryd.errors.
    RefusedError` ...)."""

    def maintain(self, *, directory: str | None, db: str | None = None,
                 retry_failed: bool = False) -> dict[str, Any]:
        """Extract the due sessions (of ``directory``'s project, else all); the report."""
        ...

    def list(self, *, user: bool = False, directory: str | None = None,
             db: str | None = None, include_retired: bool = False
             ) -> builtins.list[dict[str, Any]]:
        """The memories of ``directory``'s project, the user's (``user``), or all."""
        ...

    def search(self, *, query: str, directory: str | None = None, db: str | None = None,
               limit: int = 10, include_retired: bool = False, project: str | None = None
               ) -> builtins.list[dict[str, Any]]:
        """The best ``limit`` matches of ``query``, best first, each with ``score``."""
        ...

    def show(self, *, memory_id: str) -> dict[str, Any] | None:
        """One memory (id or unique prefix) and its lineage; ``None`` when none has it."""
        ...

    def status(self) -> dict[str, Any]:
        """Counts, marks, failures, the store, and the running daemon's own status."""
        ...

    def dream(self, *, project_key: str | None = None, project_root: str | None = None,
              dry_run: bool = False, caller: str = "user") -> dict[str, Any]:
        """A forced dream of one scope (``project_key`` ``None``: the user's); its journal
        entry."""
        ...

    def undo(self, *, run_id: str, caller: str = "user") -> dict[str, Any]:
        """Undo a dream run; its journal entry."""
        ...

    def add(self, *, content: str, type: str, scope: str, directory: str | None = None,
            db: str | None = None, project: str | None = None,
            caller: str = "user") -> dict[str, Any]:
        """Store one memory by hand: ``{"memory", "status", "superseded"}``."""
        ...

    def forget(self, *, memory_id: str, caller: str = "user", directory: str | None = None,
               db: str | None = None) -> dict[str, Any]:
        """Retire one memory (a tombstone): ``{"memory"}``."""
        ...

    def profile(self) -> dict[str, Any]:
        """The user's user-scope memories grouped by type."""
        ...

    def resolve(self, *, directory: str, db: str | None = None) -> dict[str, Any]:
        """The projects of ``directory``: ``{"directory", "projects", "store_roots"}``."""
        ...

    def context(self, *, directory: str | None = None, session: str | None = None,
                project: str | None = None, worktree: str | None = None,
                query: str | None = None) -> dict[str, Any]:
        """A session's context block: ``{"text", "entries", ...}``."""
        ...

    def capture_now(self, *, directory: str) -> dict[str, Any]:
        """Extract ``directory``'s newest session now; the report."""
        ...

    def history_sessions(self, *, directory: str, limit: int = 20, db: str | None = None
                         ) -> builtins.list[dict[str, Any]]:
        """Recent OpenCode sessions of ``directory``'s project, newest first."""
        ...

    def history_messages(self, *, session_id: str, offset: int = 0, limit: int = 50,
                         db: str | None = None) -> dict[str, Any]:
        """One page of a session's messages as text."""
        ...

    def history_search(self, *, query: str, directory: str, limit: int = 20,
                       db: str | None = None) -> builtins.list[dict[str, Any]]:
        """Messages of ``directory``'s project that match ``query``."""
        ...

    def export(self) -> dict[str, Any]:
        """Every memory as one export document."""
        ...

    def import_memories(self, *, document: object) -> dict[str, Any]:
        """Add an export document's memories; what was added and skipped."""
        ...

    def purge(self, *, memory_id: str, caller: str = "user") -> dict[str, Any]:
        """Delete one memory for good (the user's alone)."""
        ...

    def history_compactions(self, *, session_id: str, db: str | None = None
                            ) -> dict[str, Any]:
        """A session's compaction summaries: ``{"compactions", ...}``."""
        ...

    def edit(self, *, memory_id: str, content: str | None = None, type: str | None = None,
             caller: str = "user", directory: str | None = None, db: str | None = None
             ) -> dict[str, Any]:
        """Change one memory's content or type (a new version supersedes it)."""
        ...

    def restore(self, *, memory_id: str, caller: str = "user", directory: str | None = None,
                db: str | None = None) -> dict[str, Any]:
        """Bring a forgotten memory back."""
        ...

    def browse(self, *, project: str | None = None, scope: str | None = None,
               type: str | None = None, status: str = "active", text: str | None = None,
               offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """One page of memories for the web page: ``{"memories", "total", ...}``."""
        ...

    def projects(self) -> dict[str, Any]:
        """The projects the store has memories for."""
        ...

    def stats(self) -> dict[str, Any]:
        """Counts of the store and the journal."""
        ...

    def journal_page(self, *, project: str | None = None, user: bool = False,
                     offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """One page of the dream journal."""
        ...

    def confirm(self, *, memory_id: str, reject: bool = False, caller: str = "user"
                ) -> dict[str, Any]:
        """Confirm (or ``reject``) a memory waiting for the user."""
        ...

    def pending(self) -> builtins.list[dict[str, Any]]:
        """The memories waiting for the user's confirmation."""
        ...

    def integrity(self) -> dict[str, Any]:
        """The store checked against the state file."""
        ...

    def recall(self, *, session: str, message_id: str, text: str,
               directory: str | None = None, project: str | None = None) -> dict[str, Any]:
        """A user message's recall part."""
        ...

    def recall_given(self, *, session: str, message_id: str, digest: str) -> dict[str, Any]:
        """The plugin's word that a recall part reached its message."""
        ...

    def action(self, *, session: str, directory: str | None = None,
               project: str | None = None, tool: str = "", path: str = "",
               command: str = "", error: str = "", call: str = "") -> dict[str, Any]:
        """The note for one tool call of ``session`` (``call``: the tool call's id)."""
        ...

    def action_given(self, *, session: str, digest: str) -> dict[str, Any]:
        """The plugin's word that a tool call's note reached the tool's output."""
        ...


#: The wire's route table: the methods of :class:`UseCases`, in their order.
ROUTES: tuple[str, ...] = tuple(name for name, value in vars(UseCases).items()
                                if isinstance(value, FunctionType) and not name.startswith("_"))
#: The routes also served on ``GET`` with a query string (the OpenCode plugin's request).
GET_ROUTES: frozenset[str] = frozenset({"context", "recall", "recall_given", "action",
                                        "action_given"})

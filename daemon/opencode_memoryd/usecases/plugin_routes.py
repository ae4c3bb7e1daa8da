"""The routes the OpenCode plugin calls, as methods of
:class:`~opencode_memoryd.usecases.service.Service`: a session's block, a user message's
recall part, and the plugin's word that the part reached the message."""

from __future__ import annotations

from typing import Any

from opencode_memoryd.usecases.context_cache import ContextCache
from opencode_memoryd.usecases.recall import RecallCache


class PluginRoutes:
    """Mixed into :class:`~opencode_memoryd.usecases.service.Service`, which sets both
    caches."""

    _context: ContextCache
    _recall: RecallCache

    def context(self, *, directory: str | None = None, session: str | None = None,
                project: str | None = None, worktree: str | None = None,
                query: str | None = None) -> dict[str, Any]:
        """A session's block (:mod:`opencode_memoryd.usecases.context`) as ``to_dict``;
        ``worktree`` (the plugin sends it) is not needed."""
        del worktree
        return self._context.context(directory=directory, session=session, project=project,
                                     query=query)

    def recall(self, *, session: str, message_id: str, text: str,
               directory: str | None = None, project: str | None = None) -> dict[str, Any]:
        """See :meth:`opencode_memoryd.usecases.recall.RecallCache.recall`."""
        return self._recall.recall(directory=directory, session=session,
                                   message_id=message_id, text=text, project=project)

    def recall_given(self, *, session: str, message_id: str, digest: str) -> dict[str, Any]:
        """See :meth:`opencode_memoryd.usecases.recall.RecallCache.confirm`."""
        return self._recall.confirm(session=session, message_id=message_id, digest=digest)

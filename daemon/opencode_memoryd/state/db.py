"""Our own state, in our own SQLite file under the state dir (never OpenCode's database).

:class:`StateDB` is the one object the rest of the package holds. Its operations come from
one class per group of tables:

* :class:`~opencode_memoryd.state.items.OutboxTables`: the high-water marks (``marks``)
  and the transactional outbox (``items``);
* :class:`~opencode_memoryd.state.queue.QueueTable`: the daemon's work queue (``queue``);
* :class:`~opencode_memoryd.state.runs.RunTables`: ``maintain`` runs (``runs``) and dream
  runs (``dream_runs``, ``dream_settled``);
* :class:`~opencode_memoryd.state.failures.FailureTables`: chunks whose extraction keeps
  failing (``chunk_failures``) and the tokens of failed calls (``failed_calls``);
* :class:`~opencode_memoryd.state.llm.LlmModeTable`: the structured-output mode that works
  per LLM endpoint and model (``llm_modes``);

all on one :class:`~opencode_memoryd.state.engine.StateFile` (engine, PRAGMAs, schema).
"""

from __future__ import annotations

from opencode_memoryd.state.failures import FailureTables
from opencode_memoryd.state.items import OutboxTables
from opencode_memoryd.state.llm import LlmModeTable
from opencode_memoryd.state.queue import QueueTable
from opencode_memoryd.state.runs import RunTables

__all__ = ["StateDB"]


class StateDB(OutboxTables, QueueTable, RunTables, FailureTables, LlmModeTable):
    """The state file (``state.db``), opened and migrated.

    Commits use ``synchronous=FULL`` in WAL mode, so a returned commit survives power loss.

    Args:
        path: the SQLite file; parent folders are created (mode 0700).

    Raises:
        StateError: the file cannot be created, opened or migrated.
    """

"""Our own state, in our own SQLite file under the state dir (never OpenCode's database).

:class:`StateDB` is the one object that opens the file. It composes one repository per
group of tables, all on one :class:`~opencode_memoryd.state.engine.StateFile` (engine,
PRAGMAs, transactions, schema); a consumer takes the repositories it needs:

* ``marks`` (:class:`~opencode_memoryd.state.items.MarkTable`): the high-water marks;
* ``outbox`` (:class:`~opencode_memoryd.state.items.OutboxTable`): the transactional
  outbox (``items``);
* ``queue`` (:class:`~opencode_memoryd.state.queue.QueueTable`): the daemon's work queue;
* ``runs`` (:class:`~opencode_memoryd.state.runs.RunTables`): ``maintain`` runs (``runs``)
  and dream runs (``dream_runs``, ``dream_settled``);
* ``failures`` (:class:`~opencode_memoryd.state.failures.FailureTables`): chunks whose
  extraction keeps failing (``chunk_failures``) and the tokens of failed calls
  (``failed_calls``);
* ``llm`` (:class:`~opencode_memoryd.state.llm.LlmModeTable`): the structured-output mode
  that works per LLM endpoint and model (``llm_modes``);
* ``replies`` (:class:`~opencode_memoryd.state.replies.ReplyTable`): the model's answers
  kept until their work is done (``llm_replies``);
* ``agent`` (:class:`~opencode_memoryd.state.agent.AgentTable`): the agent's forgets, for
  their rate limit (``agent_forgets``);
* ``secrets`` (:class:`~opencode_memoryd.state.secrets.SecretTable`): the keyed digests of
  the secrets recognised per session (``session_secrets``, ``secret_key``);
* ``recall`` (:class:`~opencode_memoryd.state.recall.RecallTable`): the recall parts
  offered to sessions and those that reached them, and the notes at tool calls that
  reached them (``recall_parts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opencode_memoryd.models import Mark
from opencode_memoryd.state.agent import AgentTable
from opencode_memoryd.state.apply import apply_ops
from opencode_memoryd.state.engine import StateFile
from opencode_memoryd.state.failures import FailureTables
from opencode_memoryd.state.items import Item, MarkTable, OutboxTable, item_from_row
from opencode_memoryd.state.llm import LlmModeTable
from opencode_memoryd.state.queue import QueueTable
from opencode_memoryd.state.recall import RecallTable
from opencode_memoryd.state.replies import ReplyTable
from opencode_memoryd.state.runs import RunTables
from opencode_memoryd.state.secrets import SecretTable

__all__ = ["BatchOp", "StateDB"]

#: Sessions per statement of :meth:`StateDB.sessions_state` (SQLite's parameter limit).
_IDS_PER_QUERY = 500

#: One deferred write of a :class:`~opencode_memoryd.state.batch.StateBatch`: its kind
#: (``mark``, ``replace_mark``, ``record``, ``complete``, ``queue_done``) and the arguments
#: of the :class:`StateDB` method of the same effect.
BatchOp = tuple[Any, ...]


class StateDB:
    """The state file (``state.db``), opened and migrated, and its repositories (see the
    module docstring).

    Durable commits (``synchronous=FULL`` in WAL mode) survive power loss: the outbox's
    recorded results (``outbox.record_item``, ``outbox.complete_item``), runs and dream runs.
    Progress that can be derived again from OpenCode's database commits light (no fsync):
    marks moved without an item, the queue, and batches (:meth:`apply_batch`). A power loss
    may take back the newest light commits (never an older commit without the newer ones),
    which only means reading those turns again: the start-up pass queues every session
    read short of its newest message, and storing a result twice adds nothing.

    Args:
        path: the SQLite file; parent folders are created (mode 0700).

    Raises:
        StateError: the file cannot be created, opened or migrated.
    """

    def __init__(self, path: Path) -> None:
        self.file = StateFile(path)
        self.path = self.file.path
        self.marks = MarkTable(self.file)
        self.outbox = OutboxTable(self.file)
        self.queue = QueueTable(self.file)
        self.runs = RunTables(self.file)
        self.failures = FailureTables(self.file)
        self.llm = LlmModeTable(self.file)
        self.replies = ReplyTable(self.file)
        self.agent = AgentTable(self.file)
        self.secrets = SecretTable(self.file)
        self.recall = RecallTable(self.file)

    @property
    def write_count(self) -> int:
        """See :attr:`~opencode_memoryd.state.engine.StateFile.write_count`."""
        return self.file.write_count

    def close(self) -> None:
        """Close the file's pooled connections."""
        self.file.close()

    def apply_batch(self, ops: Sequence[BatchOp]) -> None:
        """Apply the deferred writes of a :class:`~opencode_memoryd.state.batch.StateBatch`
        in one light transaction (all or nothing), one ``executemany`` per statement
        (:func:`~opencode_memoryd.state.apply.apply_ops`).

        Raises:
            ValueError: an unknown kind of write (nothing is written).
        """
        with self.file.tx(durable=False) as c:
            apply_ops(c, ops)

    def sessions_state(self, source_id: str, session_ids: Sequence[str]
                       ) -> tuple[dict[str, tuple[Mark, int | None]], list[Item]]:
        """The marks and outbox items of many sessions of one source, in one read
        transaction (two statements per 500 sessions).

        Returns:
            ``({session_id: (mark, max_rowid)}`` for the sessions that have a mark,
            ``[every item of those sessions, any status]``).
        """
        marks: dict[str, tuple[Mark, int | None]] = {}
        items: list[Item] = []
        ids = list(dict.fromkeys(session_ids))
        with self.file.read() as c:
            for start in range(0, len(ids), _IDS_PER_QUERY):
                part = ids[start:start + _IDS_PER_QUERY]
                params: dict[str, Any] = {f"i{k}": v for k, v in enumerate(part)}
                params["s"] = source_id
                names = ", ".join(f":i{k}" for k in range(len(part)))
                for r in c.exec_driver_sql(
                        "SELECT session_id, storage, time_created, message_id, max_rowid "
                        f"FROM marks WHERE source_id=:s AND session_id IN ({names})",
                        params).fetchall():
                    marks[str(r[0])] = (Mark(str(r[1]), (int(r[2]), str(r[3]))),
                                        None if r[4] is None else int(r[4]))
                items += [item_from_row(r) for r in c.exec_driver_sql(
                    f"SELECT * FROM items WHERE source_id=:s AND session_id IN ({names})",
                    params).mappings().all()]
        return marks, items

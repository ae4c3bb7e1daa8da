"""Chunks whose extraction keeps failing (``chunk_failures``), and the tokens of failed
calls (``failed_calls``).

* ``chunk_failures``: one row per chunk of turns whose extraction failed in a way that
  repeats (a refused answer, a refused request), keyed by where the chunk starts
  (:func:`failure_id`: a chunk that grows with new turns while it keeps failing is still
  the same chunk). ``failures`` counts the consecutive failures with the same
  ``fingerprint`` (the same answer byte for byte, or the same error); another failure
  starts the count again. Status ``failing`` while the normal runs retry it; ``given_up``
  once the rules captured it instead and the session's mark moved past it. Recording a
  result that reaches past the chunk's start
  (:meth:`~opencode_memoryd.state.items.OutboxTable.record_item`) drops a ``failing``
  row; a ``given_up`` row stays until the chunk is extracted again on demand (``maintain
  --retry-failed``).
* ``failed_calls``: the tokens of LLM calls that produced no stored result, so the daily
  token budget sees them (:meth:`~opencode_memoryd.state.items.OutboxTable.tokens_since`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opencode_memoryd.models import Mark
from opencode_memoryd.state.engine import StateFile
from opencode_memoryd.state.items import Item, insert_item

if TYPE_CHECKING:
    from sqlalchemy.engine import RowMapping

__all__ = ["ChunkFailure", "FailureTables", "failure_id"]

#: Longest failure reason kept, in characters.
REASON_CHARS = 300


def failure_id(source_id: str, session_id: str, storage: str, first_id: str) -> str:
    """The key of a chunk's failure record: the session and the chunk's first message."""
    key = f"{source_id}|{session_id}|{storage}|{first_id}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class ChunkFailure:
    """One ``chunk_failures`` row.

    Attributes:
        id: :func:`failure_id` of the chunk.
        source_id: the database's identity.
        session_id: the session.
        storage: the OpenCode table the positions are in.
        after: the session's mark before the chunk (``None``: the session's start); the
            chunk is the turns after it, up to ``last``.
        first: the position of the chunk's first message.
        last: the position of its last message (the mark once it is processed).
        project_key: the session's project.
        project_root: the project's folder.
        fingerprint: what identifies the failure (a digest of the answer, or the error).
        reason: the failure, one line (at most :data:`REASON_CHARS` characters).
        failures: consecutive failures with this fingerprint.
        status: ``failing`` or ``given_up``.
        first_failed_at: the first failure (ISO 8601 UTC).
        last_failed_at: the last failure (ISO 8601 UTC).
        given_up_at: when it was given up, else ``None``.
    """

    id: str
    source_id: str
    session_id: str
    storage: str
    after: Mark | None
    first: tuple[int, str]
    last: tuple[int, str]
    project_key: str
    project_root: str | None
    fingerprint: str = ""
    reason: str = ""
    failures: int = 0
    status: str = "failing"
    first_failed_at: str = ""
    last_failed_at: str = ""
    given_up_at: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-safe dict for ``status`` and ``doctor`` (no transcript text)."""
        return {"id": self.id, "session_id": self.session_id,
                "project_root": self.project_root, "reason": self.reason,
                "failures": self.failures, "status": self.status,
                "first_failed_at": self.first_failed_at,
                "last_failed_at": self.last_failed_at, "given_up_at": self.given_up_at}


class FailureTables:
    """The ``chunk_failures`` and ``failed_calls`` repository (``StateDB.failures``).
    Times named ``now`` are ISO 8601 UTC."""

    def __init__(self, file: StateFile) -> None:
        self._file = file

    def chunk_failed(self, failure: ChunkFailure, now: str) -> int:
        """Count one failure of a chunk (``failure.fingerprint`` and ``failure.reason`` say
        which) and return its consecutive identical failures, this one included.

        A row that is ``given_up`` keeps its status; a new fingerprint restarts the count
        at 1. The chunk's extent (``after``, ``last``) is updated: it may have grown.
        """
        reason = " ".join(failure.reason.split())[:REASON_CHARS]
        after = failure.after
        with self._file.tx() as c:
            c.exec_driver_sql(
                """INSERT INTO chunk_failures (id, source_id, session_id, storage,
                          after_time, after_id, first_time, first_id, last_time, last_id,
                          project_key, project_root, fingerprint, reason, failures, status,
                          first_failed_at, last_failed_at)
                        VALUES (:id, :s, :sid, :st, :at, :ai, :ft, :fi, :lt, :li, :pk, :pr,
                          :fp, :reason, 1, 'failing', :now, :now)
                        ON CONFLICT (id) DO UPDATE SET
                          failures = CASE WHEN chunk_failures.fingerprint = excluded.fingerprint
                                          THEN chunk_failures.failures + 1 ELSE 1 END,
                          fingerprint = excluded.fingerprint, reason = excluded.reason,
                          last_failed_at = excluded.last_failed_at,
                          after_time = excluded.after_time, after_id = excluded.after_id,
                          last_time = excluded.last_time, last_id = excluded.last_id""",
                {"id": failure.id, "s": failure.source_id, "sid": failure.session_id,
                 "st": failure.storage,
                 "at": after.position[0] if after else None,
                 "ai": after.position[1] if after else None,
                 "ft": failure.first[0], "fi": failure.first[1], "lt": failure.last[0],
                 "li": failure.last[1], "pk": failure.project_key,
                 "pr": failure.project_root, "fp": failure.fingerprint, "reason": reason,
                 "now": now},
            )
            n = c.exec_driver_sql("SELECT failures FROM chunk_failures WHERE id=:id",
                          {"id": failure.id}).scalar_one()
        return int(n or 0)

    def give_up_chunk(self, failure_id: str, item: Item, now: str) -> None:
        """Give a chunk up: record ``item`` (what the rules captured from it; stored and
        the mark moved by :meth:`complete_item` as usual) and mark its failure row
        ``given_up``, in one transaction."""
        with self._file.tx() as c:
            insert_item(c, item, now)
            c.exec_driver_sql("UPDATE chunk_failures SET status='given_up', given_up_at=:now "
                           "WHERE id=:id", {"id": failure_id, "now": now})

    def chunk_failures(self, *, status: str | None = None, source_id: str | None = None,
                       limit: int | None = None) -> list[ChunkFailure]:
        """Failure rows, oldest first (by the position of their last message), optionally
        of one ``status`` and one source."""
        sql = "SELECT * FROM chunk_failures WHERE 1=1"
        params: dict[str, Any] = {}
        if status is not None:
            sql += " AND status=:status"
            params["status"] = status
        if source_id is not None:
            sql += " AND source_id=:s"
            params["s"] = source_id
        sql += " ORDER BY session_id, last_time, last_id"
        if limit is not None:
            sql += " LIMIT :limit"
            params["limit"] = int(limit)
        with self._file.read() as c:
            rows = c.exec_driver_sql(sql, params).mappings().all()
        return [_failure(r) for r in rows]

    def record_failed_call(self, kind: str, tokens_in: int, tokens_out: int,
                           now: str) -> None:
        """Record the tokens of calls that produced no stored result (``kind``: why, e.g.
        ``bad_reply``); nothing is written when both counts are 0."""
        if tokens_in <= 0 and tokens_out <= 0:
            return
        with self._file.tx() as c:
            c.exec_driver_sql("INSERT INTO failed_calls (at, kind, tokens_in, tokens_out) "
                           "VALUES (:at, :kind, :ti, :to)",
                      {"at": now, "kind": kind, "ti": max(tokens_in, 0),
                       "to": max(tokens_out, 0)})


def _failure(r: RowMapping) -> ChunkFailure:
    after = (Mark(str(r["storage"]), (int(r["after_time"]), str(r["after_id"])))
             if r["after_id"] is not None else None)
    return ChunkFailure(
        id=r["id"], source_id=r["source_id"], session_id=r["session_id"],
        storage=str(r["storage"]), after=after,
        first=(int(r["first_time"]), str(r["first_id"])),
        last=(int(r["last_time"]), str(r["last_id"])),
        project_key=r["project_key"], project_root=r["project_root"],
        fingerprint=r["fingerprint"], reason=r["reason"], failures=int(r["failures"]),
        status=r["status"], first_failed_at=r["first_failed_at"],
        last_failed_at=r["last_failed_at"], given_up_at=r["given_up_at"],
    )

"""Secrets recognised per session, as keyed digests (``session_secrets``, ``secret_key``).

A value redacted once in a session is redacted wherever it appears again in that session
(:class:`~opencode_memoryd.redaction.known.SessionSecrets`); the daemon reads a session in
increments, so what earlier runs learned is kept here: the BLAKE2b digest of each value
under this file's own random key (``secret_key``, 32 bytes, made on first use), its
length and kind. Never the value itself. The key sits in the same 0600 file: the digests
stop a value being matched against other installations' files or a precomputed table,
not someone who holds this file and guesses a weak password.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from opencode_memoryd.redaction.known import Known
from opencode_memoryd.state.engine import StateFile

__all__ = ["SecretTable"]

#: Bytes of the digest key.
KEY_BYTES = 32


class SecretTable:
    """The ``session_secrets`` and ``secret_key`` repository (``StateDB.secrets``)."""

    def __init__(self, file: StateFile) -> None:
        self._file = file

    _secret_key: bytes | None = None

    def secret_key(self) -> bytes:
        """This state file's digest key (:data:`KEY_BYTES` random bytes, made and kept on
        first use)."""
        if self._secret_key is not None:
            return self._secret_key
        with self._file.tx(outbox=False) as c:
            row = c.exec_driver_sql("SELECT key FROM secret_key WHERE id=1").fetchone()
            if row is None:
                key = os.urandom(KEY_BYTES)
                c.exec_driver_sql("INSERT INTO secret_key (id, key) VALUES (1, :k)",
                                  {"k": key})
            else:
                key = bytes(row[0])
        self._secret_key = key
        return key

    def session_secrets(self, source_id: str, session_id: str) -> list[Known]:
        """What earlier runs learned in a session (``[]`` when nothing)."""
        with self._file.read() as c:
            rows = c.exec_driver_sql(
                "SELECT digest, length, kind FROM session_secrets "
                "WHERE source_id=:s AND session_id=:i", {"s": source_id, "i": session_id},
            ).fetchall()
        return [Known(bytes(r[0]), int(r[1]), str(r[2])) for r in rows]

    def add_session_secrets(self, source_id: str, session_id: str, known: Sequence[Known],
                            now: str) -> None:
        """Keep newly learned digests of a session (durably: a mark that moves past the
        turn that taught them must not outlive them). Known ones are left as they are."""
        if not known:
            return
        with self._file.tx(outbox=False) as c:
            c.exec_driver_sql(
                "INSERT OR IGNORE INTO session_secrets "
                "(source_id, session_id, digest, length, kind, created_at) "
                "VALUES (:s, :i, :d, :n, :k, :t)",
                [{"s": source_id, "i": session_id, "d": k.digest, "n": k.length,
                  "k": k.kind, "t": now} for k in known])

"""Runs (``runs``) and dream runs (``dream_runs``, ``dream_settled``).

* ``runs``: one row per ``maintain`` run with its summary.
* ``dream_runs``: one row per dream (consolidation) run of one scope, with the payloads of
  every memory it touches as they were (``before``) and as it writes them (``after``), so a
  run interrupted while applying is rolled forward and an applied run can be undone (see
  :mod:`opencode_memoryd.dream.dreamer`).
* ``dream_settled``: candidate groups of a scope that a dream already settled, by
  signature, so later dreams skip them.

Times named ``now`` are ISO 8601 UTC strings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opencode_memoryd.errors import StateError
from opencode_memoryd.state.engine import StateFile

if TYPE_CHECKING:
    from sqlalchemy.engine import RowMapping

__all__ = ["DREAM_STATUSES", "RunTables"]

#: The statuses of a ``dream_runs`` row. ``planned``: recorded, nothing written (final for a
#: dry run; a real run left ``planned`` by a crash is marked ``failed`` on recovery);
#: ``applying``: before/after recorded, writes in progress; ``applied``: every ``after``
#: payload written; ``undoing``: an undo is writing the ``before`` payloads back;
#: ``undone``: undone; ``failed`` / ``skipped``: nothing was changed.
DREAM_STATUSES: tuple[str, ...] = ("planned", "applying", "applied", "undoing", "undone",
                                   "failed", "skipped")
_DREAM_JSON = ("before", "after", "counts", "result")


class RunTables:
    """The ``runs``, ``dream_runs`` and ``dream_settled`` repository (``StateDB.runs``)."""

    def __init__(self, file: StateFile) -> None:
        self._file = file

    # -- runs ------------------------------------------------------------------------

    def start_run(self, run_id: str, command: str, now: str) -> None:
        """Record the start of a run."""
        with self._file.tx() as c:
            c.exec_driver_sql("INSERT INTO runs (id, command, started_at) VALUES (:i, :c, :n)",
                      {"i": run_id, "c": command, "n": now})

    def end_run(self, run_id: str, summary: Mapping[str, Any], now: str) -> None:
        """Record the end of a run with its summary (counts only, never transcript text)."""
        with self._file.tx() as c:
            c.exec_driver_sql("UPDATE runs SET ended_at=:n, summary=:s WHERE id=:i",
                      {"i": run_id, "n": now, "s": json.dumps(summary, sort_keys=True)})

    def last_runs(self, limit: int = 5) -> list[dict[str, Any]]:
        """The newest runs, newest first, with decoded summaries."""
        with self._file.read() as c:
            rows = c.exec_driver_sql("SELECT * FROM runs ORDER BY started_at DESC LIMIT :l",
                             {"l": limit}).mappings().all()
        return [{**dict(r), "summary": json.loads(r["summary"]) if r["summary"] else None}
                for r in rows]

    # -- dream runs ------------------------------------------------------------------

    def dream_start(self, run_id: str, *, scope_key: str, project_root: str | None,
                    trigger: str, dry_run: bool, now: str) -> None:
        """Record a new dream run (status ``planned``, nothing written yet).

        Raises:
            StateError: a run with this id exists, or the state file cannot be written.
        """
        from sqlalchemy.exc import DBAPIError  # loaded by the engine already

        try:
            with self._file.tx() as c:
                c.exec_driver_sql(
                    """INSERT INTO dream_runs (id, scope_key, project_root, "trigger",
                              dry_run, status, started_at)
                            VALUES (:i, :k, :r, :t, :d, 'planned', :n)""",
                    {"i": run_id, "k": scope_key, "r": project_root, "t": trigger,
                     "d": int(dry_run), "n": now},
                )
        except DBAPIError as exc:
            raise StateError(f"cannot record dream run {run_id}: {exc.orig}") from exc

    def dream_applying(self, run_id: str, *, before: list[dict[str, Any]],
                       after: list[dict[str, Any]], counts: Mapping[str, Any],
                       model: str | None, tokens_in: int, tokens_out: int,
                       result: Mapping[str, Any] | None = None) -> None:
        """Durably record what a run is about to write, and mark it ``applying``.

        One transaction (``synchronous=FULL``): once this returns, a crash at any later
        point is rolled forward from ``after`` by recovery. Only a ``planned`` run moves.
        ``result`` is the run's journal entry as planned (kept for recovery).

        Raises:
            StateError: the run is unknown or not ``planned``.
        """
        with self._file.tx() as c:
            n = c.exec_driver_sql(
                """UPDATE dream_runs SET status='applying', "before"=:b, "after"=:a,
                          counts=:c, model=:m, tokens_in=:ti, tokens_out=:to, result=:r
                        WHERE id=:i AND status='planned'""",
                {"i": run_id, "b": json.dumps(before, sort_keys=True),
                 "r": json.dumps(dict(result), sort_keys=True) if result is not None else None,
                 "a": json.dumps(after, sort_keys=True),
                 "c": json.dumps(dict(counts), sort_keys=True), "m": model,
                 "ti": int(tokens_in), "to": int(tokens_out)},
            ).rowcount
        if n != 1:
            raise StateError(f"dream run {run_id} is not planned; cannot start applying it")

    def dream_finish(self, run_id: str, status: str, *, now: str | None,
                     reason: str | None = None, counts: Mapping[str, Any] | None = None,
                     model: str | None = None, tokens_in: int | None = None,
                     tokens_out: int | None = None, result: Mapping[str, Any] | None = None,
                     expect: tuple[str, ...] | None = None) -> bool:
        """Move a run to ``status``; set ``ended_at`` (when ``now`` is given) and the given
        fields (``None`` leaves a field as it is).

        Args:
            expect: move only from one of these statuses (compare-and-set).

        Returns:
            Whether the row was updated (``False``: unknown id, or not in ``expect``).

        Raises:
            ValueError: an unknown status.
        """
        if status not in DREAM_STATUSES:
            raise ValueError(f"unknown dream run status {status!r}")
        sets = ["status=:s"]
        params: dict[str, Any] = {"i": run_id, "s": status}
        for col, value in (("ended_at", now), ("reason", reason), ("model", model),
                           ("tokens_in", tokens_in), ("tokens_out", tokens_out)):
            if value is not None:
                sets.append(f"{col}=:{col}")
                params[col] = value
        if counts is not None:
            sets.append("counts=:counts")
            params["counts"] = json.dumps(dict(counts), sort_keys=True)
        if result is not None:
            sets.append("result=:result")
            params["result"] = json.dumps(dict(result), sort_keys=True)
        sql = f"UPDATE dream_runs SET {', '.join(sets)} WHERE id=:i"
        if expect is not None:
            names = [f":e{i}" for i in range(len(expect))]
            sql += f" AND status IN ({', '.join(names)})"
            params.update({f"e{i}": e for i, e in enumerate(expect)})
        with self._file.tx() as c:
            return c.exec_driver_sql(sql, params).rowcount == 1

    def dream_mark_undo(self, run_id: str, status: str, now: str, *,
                        expect: tuple[str, ...]) -> bool:
        """Compare-and-set the status of an undo (``undoing`` / ``undone``) and stamp
        ``undone_at``; ``True`` when the row moved."""
        if status not in ("undoing", "undone"):
            raise ValueError(f"not an undo status: {status!r}")
        names = [f":e{i}" for i in range(len(expect))]
        params: dict[str, Any] = {"i": run_id, "s": status, "n": now}
        params.update({f"e{i}": e for i, e in enumerate(expect)})
        with self._file.tx() as c:
            return c.exec_driver_sql(
                f"UPDATE dream_runs SET status=:s, undone_at=:n WHERE id=:i "
                f"AND status IN ({', '.join(names)})", params).rowcount == 1

    def dream_settled(self, scope_key: str) -> set[str]:
        """Signatures of the candidate groups of a scope that a dream already settled
        (planned "keep", or a plan rejected by a check)."""
        with self._file.read() as c:
            rows = c.exec_driver_sql("SELECT signature FROM dream_settled WHERE scope_key=:k",
                             {"k": scope_key}).fetchall()
        return {str(r[0]) for r in rows}

    def dream_settle(self, scope_key: str, signatures: Sequence[str], run_id: str,
                     now: str) -> None:
        """Record group signatures as settled by ``run_id`` (idempotent)."""
        if not signatures:
            return
        with self._file.tx() as c:
            c.exec_driver_sql("INSERT OR IGNORE INTO dream_settled (scope_key, signature, "
                          "run_id, settled_at) VALUES (:k, :s, :r, :now)",
                          [{"k": scope_key, "s": sig, "r": run_id, "now": now}
                           for sig in signatures])

    def dream_run(self, run_id: str) -> dict[str, Any] | None:
        """One dream run with its JSON columns decoded, or ``None``.

        Keys: ``id, scope_key, project_root, trigger, dry_run (bool), status, started_at,
        ended_at, undone_at, reason, before (list of payloads), after (list of payloads),
        counts (dict), model, tokens_in, tokens_out, result (dict or None), seq`` (``seq``:
        insertion order, increasing).
        """
        with self._file.read() as c:
            row = c.exec_driver_sql("SELECT rowid AS seq, * FROM dream_runs WHERE id=:i",
                            {"i": run_id}).mappings().fetchone()
        return _dream_row(row) if row else None

    def dream_runs(self, *, scope_key: str | None = None,
                   statuses: tuple[str, ...] | None = None, dry_run: bool | None = None,
                   limit: int | None = None, newest_first: bool = True
                   ) -> list[dict[str, Any]]:
        """Dream runs (as :meth:`dream_run`, plus ``seq``: the insertion order), filtered
        by scope, statuses and dry-run flag, in the order they were started."""
        sql = "SELECT rowid AS seq, * FROM dream_runs WHERE 1=1"
        params: dict[str, Any] = {}
        if scope_key is not None:
            sql += " AND scope_key=:k"
            params["k"] = scope_key
        if statuses is not None:
            names = [f":s{i}" for i in range(len(statuses))]
            sql += f" AND status IN ({', '.join(names) or 'NULL'})"
            params.update({f"s{i}": s for i, s in enumerate(statuses)})
        if dry_run is not None:
            sql += " AND dry_run=:d"
            params["d"] = int(dry_run)
        order = "DESC" if newest_first else "ASC"
        sql += f" ORDER BY rowid {order}"
        if limit is not None:
            sql += " LIMIT :l"
            params["l"] = int(limit)
        with self._file.read() as c:
            rows = c.exec_driver_sql(sql, params).mappings().all()
        return [_dream_row(r) for r in rows]

    def last_dream(self, scope_key: str) -> dict[str, Any] | None:
        """The newest dream of a scope that was not a dry run and did not fail
        (``applied``, ``skipped``, ``undone``, …), or ``None`` — for scheduling. A
        write-time supersession (trigger ``supersede``) is no dream."""
        with self._file.read() as c:
            row = c.exec_driver_sql(
                """SELECT rowid AS seq, * FROM dream_runs WHERE scope_key=:k
                          AND dry_run=0 AND status NOT IN ('failed', 'planned')
                          AND "trigger" != 'supersede'
                        ORDER BY rowid DESC LIMIT 1""",
                {"k": scope_key}).mappings().fetchone()
        return _dream_row(row) if row else None


def _dream_row(r: RowMapping) -> dict[str, Any]:
    row = dict(r)
    row["dry_run"] = bool(row["dry_run"])
    for key in _DREAM_JSON:
        row[key] = json.loads(row[key]) if row[key] is not None else None
    return row

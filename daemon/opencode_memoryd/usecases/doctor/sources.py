"""The OpenCode databases: found or not, their schema, which storage shape is live, rows
in tables this version does not read, rows dated in the future; and, per database, the
sessions stuck behind their mark (:mod:`.backlog`).

Each database is opened once, read-only, for all of its checks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from opencode_memoryd.errors import SourceError, SourceSchemaError
from opencode_memoryd.models import iso_utc
from opencode_memoryd.source.reader import OpenCodeDB
from opencode_memoryd.source.schema import CONVERSATION_TABLES, READ_TABLES
from opencode_memoryd.source.storages.registry import SHAPES
from opencode_memoryd.usecases.doctor.backlog import stuck_check
from opencode_memoryd.usecases.doctor.model import FAIL, OK, WARN, Check, Context, guarded

#: "Live" means rows created in this many days.
RECENT_DAYS = 7
#: A row dated more than this far (ms) ahead of our clock is dated in the future.
FUTURE_TOLERANCE_MS = 5 * 60_000

Activity = dict[str, tuple[int, int | None]]


def database_checks(ctx: Context) -> list[Check]:
    """``databases``, then for each database ``database``, ``storage``, ``clock`` and
    ``stuck``."""
    try:
        paths = ctx.app.database_paths()
    except SourceError as exc:
        return [Check("databases", FAIL, str(exc),
                      "run OpenCode once, or point opencode.db_paths (or $OPENCODE_DB) at "
                      "its database")]
    out = [Check("databases", OK, f"{len(paths)} found: " + ", ".join(map(str, paths)))]
    for path in paths:
        out.extend(guarded("database", partial(_one_database, ctx, path)))
    return out


def _one_database(ctx: Context, path: Path) -> list[Check]:
    try:
        db = ctx.app.open_source(path)
    except SourceSchemaError as exc:
        return [Check("database", FAIL, str(exc),
                      "upgrade opencode-memoryd; nothing is read from this database until then")]
    except SourceError as exc:
        return [Check("database", FAIL, str(exc),
                      "check that the file exists and is readable, or fix opencode.db_paths")]
    with db:
        out = [Check("database", OK, f"{path}: {db.schema.describe()}")]
        since = ctx.now_ms - RECENT_DAYS * 86_400_000
        activity: Activity = {}

        def storage() -> Check:
            activity.update(db.table_activity(CONVERSATION_TABLES, since))
            return storage_check(path, activity)

        out += guarded("storage", storage)
        if activity:
            out += guarded("clock", lambda: clock_check(ctx, db, activity))
        out += guarded("stuck", lambda: stuck_check(ctx, db))
    return out


def _day(ms: int | None) -> str:
    if ms is None:
        return "never"
    return iso_utc(datetime.fromtimestamp(ms / 1000, tz=UTC))[:10]


def storage_check(path: Path, activity: Activity, read: frozenset[str] = READ_TABLES
                  ) -> Check:
    """Which storage shape receives rows, and whether any goes to a table we do not read.

    Args:
        path: the database, for the message.
        activity: :meth:`~opencode_memoryd.source.reader.OpenCodeDB.table_activity` of
            :data:`CONVERSATION_TABLES` over the last :data:`RECENT_DAYS` days.
        read: the tables the reader reads.
    """
    recent = {t: n for t, (n, _) in activity.items() if n}
    shapes = sorted({SHAPES[t] for t in recent if t in SHAPES})
    counts = ", ".join(f"{t} {n}" for t, n in recent.items())
    live = (f"live storage {' and '.join(shapes)} (rows in the last {RECENT_DAYS} days: "
            f"{counts})" if shapes else
            f"no turn written in the last {RECENT_DAYS} days (newest "
            f"{_day(max((n for _, n in activity.values() if n), default=None))})")
    unread = {t: v for t, v in activity.items() if t not in read and v[1] is not None}
    if not unread:
        return Check("storage", OK, f"{path}: {live}")
    what = "; ".join(f"{t}: {n} rows in the last {RECENT_DAYS} days, newest {_day(newest)}"
                     for t, (n, newest) in unread.items())
    return Check("storage", WARN,
                 f"{path}: {live}; turns written to tables this version does not read "
                 f"({what}) are not captured (it reads {', '.join(sorted(read))})",
                 "upgrade opencode-memoryd to a version that reads OpenCode's v2 storage "
                 "(session_message, session_v2)")


def clock_check(ctx: Context, db: OpenCodeDB, activity: Activity) -> Check:
    """Rows dated more than :data:`FUTURE_TOLERANCE_MS` ahead of our clock: a writer whose
    clock is wrong. Their sessions' later turns sort before them and are not read."""
    cut = ctx.now_ms + FUTURE_TOLERANCE_MS
    ahead = [t for t, (_, newest) in activity.items() if newest is not None and newest > cut]
    if not ahead:
        return Check("clock", OK, f"{db.path}: no row dated in the future")
    counts = db.table_activity(ahead, cut)
    newest = max(n for _, n in counts.values() if n is not None)
    hours = (newest - ctx.now_ms) / 3_600_000
    what = ", ".join(f"{t} {n}" for t, (n, _) in counts.items())
    return Check("clock", FAIL,
                 f"{db.path}: rows dated in the future ({what}), the newest "
                 f"{iso_utc(datetime.fromtimestamp(newest / 1000, tz=UTC))}, {hours:.1f} h "
                 "ahead of this machine's clock; turns written after them in the same "
                 "sessions sort before them and are not read",
                 "fix the clock of the machine that runs OpenCode (`timedatectl status`); "
                 "those sessions are read again once this clock passes that time")

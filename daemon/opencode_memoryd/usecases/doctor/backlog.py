"""``stuck``: sessions of one database whose finished turns have waited longer than
``daemon.max_wait_seconds`` without being captured.

Two sources: the daemon's queue in the state file (a session queued that long ago, with its
attempts and last error), and the database against the high-water marks (a session with a
finished turn after its mark that has been quiet that long). The finished-turn rule is the
one capture applies (:mod:`opencode_memoryd.conversation.turns`: fork copies dropped, quiet for
``opencode.settle_seconds``, a 2.x turn whose last step ended and not marked idle after
``opencode.unconfirmed_turn_seconds``, a turn in flight longer than
``opencode.abandoned_turn_seconds`` counts as finished). The daemon extracts a session at
the latest ``max_wait_seconds`` after its first change, so a turn older than that is stuck.
"""

from __future__ import annotations

from typing import Any

from opencode_memoryd.capture.processor import Limits
from opencode_memoryd.conversation.rows import SessionRow
from opencode_memoryd.conversation.turns import drop_fork_copies, finished_prefix, group_turns
from opencode_memoryd.models import Mark
from opencode_memoryd.source.reader import MESSAGE_BATCH, OpenCodeDB
from opencode_memoryd.source.storages.sessions import idle_of
from opencode_memoryd.state.queue import GIVE_UP_ATTEMPTS
from opencode_memoryd.usecases.doctor.model import FAIL, OK, SKIP, WARN, Check, Context

#: At most this many sessions behind their mark are read, those idle longest first.
MAX_SESSIONS_READ = 200
#: How many stuck sessions the message names.
NAMED = 3


def age(ms: float) -> str:
    """A duration in ms as ``45 s``, ``12 min``, ``3.2 h`` or ``2.0 d``."""
    s = ms / 1000
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h" if s < 172_800 else f"{s / 86_400:.1f} d"


def waited_ms(db: OpenCodeDB, session: SessionRow, mark: Mark | None, *, storage: str,
              now_ms: int, limits: Limits) -> int | None:
    """How long (ms) the session's oldest finished turn after ``mark`` has been quiet, or
    ``None`` when no finished turn follows the mark (reads one batch of messages of the
    session's ``storage``, with the capture's own finished-turn rule)."""
    position = mark.position if mark is not None and mark.storage == storage else None
    messages = db.messages_after(session.id, position, limit=MESSAGE_BATCH, storage=storage)
    turns = group_turns(drop_fork_copies(messages, session.time_created))
    idle = idle_of(session)
    done = finished_prefix(turns, now_ms=now_ms, abandoned_ms=limits.abandoned_ms,
                           settle_ms=limits.settle_ms, idle=idle,
                           unconfirmed_ms=limits.unconfirmed_ms)
    return now_ms - done[0].last_write_ms if done else None


def stuck_check(ctx: Context, db: OpenCodeDB) -> Check:
    """The ``stuck`` check of one database: ``fail`` while a daemon runs (it should have
    captured them), ``warn`` when none runs or it is still catching up."""
    state = ctx.state()
    if state is None:
        return Check("stuck", SKIP, f"{db.path}: no state file yet (nothing captured)")
    cfg = ctx.app.config
    max_wait = cfg.daemon.max_wait_seconds
    max_wait_ms = int(max_wait * 1000)
    ident = db.identity
    waiting = _queued_too_long(state.queue.queue(), ident, ctx.now_ms, max_wait_ms)
    sessions = {s.id: s for s in db.sessions(include_archived=cfg.opencode.include_archived)}
    marks = state.marks.marks(ident)
    newest = db.last_messages(list(sessions))
    behind = sorted((sid for sid, last in newest.items()
                     if sid not in marks or marks[sid].storage != last.storage
                     or last.position > marks[sid].position),
                    key=lambda sid: newest[sid].position)
    if behind and not marks and not waiting:
        return Check("stuck", WARN,
                     f"{db.path}: none of its sessions has been captured yet "
                     f"({len(behind)} with messages)",
                     "run `opencode-memoryd maintain --all`, or start the daemon")
    limits = ctx.app.limits()
    for sid in behind[:MAX_SESSIONS_READ] if marks else []:
        if sid in waiting:
            continue
        waited = waited_ms(db, sessions[sid], marks.get(sid), storage=newest[sid].storage,
                           now_ms=ctx.now_ms, limits=limits)
        if waited is not None and waited > max_wait_ms:
            waiting[sid] = f"a finished turn quiet for {age(waited)}"
    if not waiting:
        return Check("stuck", OK,
                     f"{db.path}: no finished turn waits longer than max_wait_seconds "
                     f"({max_wait:g} s); {len(behind)} session(s) have newer messages")
    named = "; ".join(f"{sid} ({why})" for sid, why in list(waiting.items())[:NAMED])
    more = f"; and {len(waiting) - NAMED} more" if len(waiting) > NAMED else ""
    detail = (f"{db.path}: {len(waiting)} session(s) with finished turns waiting longer "
              f"than max_wait_seconds ({max_wait:g} s): {named}{more}")
    return _stuck_verdict(ctx, detail)


def _queued_too_long(queue: list[dict[str, Any]], ident: str, now_ms: int,
                     max_wait_ms: int) -> dict[str, str]:
    """The sessions of database ``ident`` queued longer than ``max_wait_ms`` (ms) or given
    up, with why: ``{session id: "queued 2 h ago, 3 failed attempt(s), last error: …"}``."""
    waiting: dict[str, str] = {}
    for row in queue:
        queued = now_ms - int(row["first_change_ms"])
        given_up = row["attempts"] >= GIVE_UP_ATTEMPTS
        if row["source_id"] == ident and (queued > max_wait_ms or given_up):
            waiting[row["session_id"]] = (
                f"queued {age(queued)} ago"
                + (f", given up after {row['attempts']} failed attempts" if given_up else
                   f", {row['attempts']} failed attempt(s)" if row["attempts"] else "")
                + (f", last error: {row['last_error']}" if row["last_error"] else ""))
    return waiting


def _stuck_verdict(ctx: Context, detail: str) -> Check:
    """The ``stuck`` check when sessions wait (``detail`` names them): a warning while the
    daemon catches up or when none runs, a failure when it runs and should have."""
    daemon = ctx.probes.daemon
    if daemon.running and (daemon.status or {}).get("daemon", {}).get("catching_up"):
        return Check("stuck", WARN, detail + " (the daemon is still catching up)",
                     "run doctor again once `opencode-memoryd status` no longer says "
                     "catching up")
    if daemon.running:
        return Check("stuck", FAIL, detail,
                     "see `opencode-memoryd status` and the log for the error; "
                     "`opencode-memoryd maintain --all` retries them now")
    return Check("stuck", WARN, detail + " (no daemon runs)",
                 "start the daemon (`opencode-memoryd install`), or run "
                 "`opencode-memoryd maintain --all`")

"""``last-extraction`` and ``last-dream``: when capture and consolidation last ran, and
what came of it (the state file's outbox and ``maintain`` runs; the dream journal)."""

from __future__ import annotations

from opencode_memoryd.dream.journal import DreamJournal
from opencode_memoryd.usecases.doctor.model import OK, SKIP, WARN, Check, Context

_CAPTURE = "run `opencode-memoryd maintain --all`, or start the daemon"
#: Dream runs a crash can leave behind (finished by the next dream or daemon start).
_UNFINISHED = ("planned", "applying", "undoing")


def last_extraction_check(ctx: Context) -> Check:
    """The ``last-extraction`` check."""
    state = ctx.state()
    if state is None:
        return Check("last-extraction", WARN, "nothing captured yet (no state file)",
                     _CAPTURE)
    item, runs = state.outbox.last_item(), state.runs.last_runs(1)
    parts = []
    if item is not None:
        parts.append(f"last extraction {item['updated_at']}: session {item['session_id']} "
                     f"({item['project_root']}), {item['memories']} memory candidate(s), "
                     f"{item['status']} by {item['extractor']}")
    failed = 0
    if runs:
        r = runs[0]
        summary = r.get("summary") or {}
        failed = int(summary.get("failed") or 0)
        parts.append(f"last maintain {r['started_at']}: added {summary.get('added', '?')}, "
                     f"failed {summary.get('failed', '?')}"
                     + ("" if r.get("ended_at") else " (did not finish)"))
    if not parts:
        return Check("last-extraction", WARN, "nothing extracted yet", _CAPTURE)
    detail = "; ".join(parts)
    pending = state.outbox.counts()["items_pending"]
    if pending:
        return Check("last-extraction", WARN,
                     f"{detail}; {pending} result(s) recorded but not stored yet",
                     "the next run stores them; if they stay, see the log")
    if failed:
        return Check("last-extraction", WARN, detail,
                     "`opencode-memoryd maintain --all --json` lists the sessions that "
                     "failed and why")
    return Check("last-extraction", OK, detail)


def last_dream_check(ctx: Context) -> Check:
    """The ``last-dream`` check."""
    if not ctx.app.config.dream.enabled:
        return Check("last-dream", SKIP, "dream.enabled is false")
    state = ctx.state()
    if state is not None and not ctx.probes.daemon.running:
        stuck = state.runs.dream_runs(statuses=_UNFINISHED, dry_run=False, limit=1)
        if stuck:
            return Check("last-dream", WARN,
                         f"dream {stuck[0]['id']} ({stuck[0]['scope_key']}) was interrupted "
                         f"while {stuck[0]['status']}",
                         "the next daemon start or `opencode-memoryd dream` finishes it")
    # dreams only: not the edits and supersessions journaled beside them
    entries = [e for e in DreamJournal(ctx.app.journal_path).entries()
               if e.get("action", "dream") == "dream"][:1]
    if not entries:
        return Check("last-dream", OK, "no dream yet (a scope dreams once it has enough "
                                       "new memories)")
    e = entries[0]
    counts = e.get("counts") or {}
    what = ", ".join(f"{k} {counts[k]}" for k in ("before", "after", "merged", "superseded")
                     if k in counts)
    detail = (f"last dream {e.get('ended_at') or e.get('started_at')} ({e.get('scope')} "
              f"{e.get('project_root') or ''}".rstrip() + f", {e.get('trigger')}): "
              f"{e.get('status')}" + (f" ({what})" if what else "")
              + (f": {e['reason']}" if e.get("reason") else ""))
    if e.get("status") == "failed":
        return Check("last-dream", WARN, detail,
                     "`opencode-memoryd journal` shows the run; the next dream retries")
    return Check("last-dream", OK, detail)

"""The dream journal as a table for a terminal (:func:`render_table`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from opencode_memoryd.models import parse_iso

_RUN_ID_WIDTH = 12
_WHERE_WIDTH = 32

_HEADERS = ("STARTED", "RUN", "TRIGGER", "WHERE", "STATUS", "BEFORE→AFTER", "MERGED",
            "SUPERSEDED", "REJECTED", "TOKENS", "REASON")
_RIGHT = {"MERGED", "SUPERSEDED", "REJECTED", "TOKENS"}


def render_table(entries: Sequence[Mapping[str, Any]]) -> str:
    """Render journal entries as a compact table for a terminal, one row per entry.

    Columns: start time (local, ``YYYY-MM-DD HH:MM``; the raw text if it is not ISO 8601),
    run id (first 12 characters), trigger, where (``user`` for user scope, otherwise the
    project root or key, shortened from the left), status (``+dry`` for dry runs),
    ``before→after``, merged, superseded, rejected plans, tokens (``in/out``) and, for
    entries whose status is not ``ok``, the reason. Missing values show as ``-``. Rows
    keep the order given (pass
    :meth:`~opencode_memoryd.dream.journal.DreamJournal.entries` for newest first).

    Returns:
        The table without a trailing newline, or ``"no dreams recorded"`` when empty.
    """
    if not entries:
        return "no dreams recorded"
    rows = [_row(e) for e in entries]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(_HEADERS)]
    out = []
    for cells in (_HEADERS, *rows):
        parts = []
        for i, (head, cell) in enumerate(zip(_HEADERS, cells, strict=True)):
            if i == len(_HEADERS) - 1:
                parts.append(cell)
            elif head in _RIGHT:
                parts.append(cell.rjust(widths[i]))
            else:
                parts.append(cell.ljust(widths[i]))
        out.append("  ".join(parts).rstrip())
    return "\n".join(out)


def _row(e: Mapping[str, Any]) -> tuple[str, ...]:
    raw = e.get("counts")
    counts: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    status = _text(e.get("status"))
    if e.get("dry_run") is True:
        status += "+dry"
    if e.get("scope") == "user":
        where = "user"
    else:
        where = _text(e.get("project_root") or e.get("project_key"))
        if len(where) > _WHERE_WIDTH:
            where = "…" + where[-(_WHERE_WIDTH - 1):]
    reason = "" if e.get("status") == "ok" else _text(e.get("reason"), empty="")
    return (
        _when(e.get("started_at")),
        _text(e.get("run_id"))[:_RUN_ID_WIDTH],
        _text(e.get("trigger")),
        where,
        status,
        f"{_num(counts.get('before'))}→{_num(counts.get('after'))}",
        _num(counts.get("merged")),
        _num(counts.get("superseded")),
        _num(counts.get("rejected_plans")),
        f"{_num(e.get('tokens_in'))}/{_num(e.get('tokens_out'))}",
        " ".join(reason.split()),
    )


def _when(value: Any) -> str:
    if not isinstance(value, str) or not value:
        return "-"
    try:
        dt: datetime = parse_iso(value)
    except ValueError:
        return value
    return dt.astimezone().strftime("%Y-%m-%d %H:%M")


def _text(value: Any, *, empty: str = "-") -> str:
    if value is None or value == "":
        return empty
    return str(value)


def _num(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    n = int(value)
    if abs(n) >= 10_000_000:
        return f"{n / 1_000_000:.0f}M"
    if abs(n) >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if abs(n) >= 10_000:
        return f"{n / 1000:.0f}k"
    return str(n)

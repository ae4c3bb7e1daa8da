"""Plain-text rendering shared by the commands (tables, memory lines)."""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # not `typing`'s: the thin client path does not import it
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


def print_error(message: object) -> None:
    """Print ``opencode-memoryd: MESSAGE`` to stderr, secrets redacted (an error can
    quote a database row)."""
    from opencode_memoryd.redaction.engine import redact  # only when there is an error

    print(f"opencode-memoryd: {redact(str(message)).text}", file=sys.stderr)


def table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> str:
    """Left-aligned columns two spaces apart, with a dashed rule under the headers."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = []
    for n, r in enumerate(cells):
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON (dates and paths as strings)."""
    print(json.dumps(obj, indent=2, default=str))


def print_memories(memories: Sequence[dict[str, Any]], as_json: bool) -> None:
    """One line per memory (id, the date it was said, type, where, content; retired,
    agent, pending and "may be out of date" markers), or a JSON array."""
    from opencode_memoryd.staleness import stale_note

    if as_json:
        print(json.dumps(list(memories), indent=2))
        return
    if not memories:
        print("no memories")
        return
    for m in memories:
        where = "user" if m["scope"] == "user" else (m["project_root"] or m["project_id"])
        retired = ""
        if m.get("status") == "retired":
            retired = "  (retired" + (f", superseded by {m['superseded_by']}"
                                      if m.get("superseded_by") else "") + ")"
        if m.get("provenance") == "agent":
            retired += "  (the agent's note" + (", pending your confirmation)"
                                                if m.get("pending") else ")")
        if m.get("stale"):
            retired += f"  ({stale_note(m['stale'])})"
        said = str(m.get("said_at") or m.get("created_at") or "")[:10]
        print(f"{m['id']}  {said}  [{m['type']}, {where}]  {m['content']}{retired}")

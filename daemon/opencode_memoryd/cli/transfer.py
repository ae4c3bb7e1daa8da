"""``export`` and ``import``: every memory with its provenance, out to a file and back
(:mod:`opencode_memoryd.usecases.transfer`).

``--format json`` writes the export document itself. ``--format markdown`` writes a page to
read (memories by scope and project, each with its type, when it was said, who asserted it
and its status) that also holds, in an HTML comment after each memory, its whole payload:
``import`` reads either form back.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opencode_memoryd.cli.commands import COMMANDS
from opencode_memoryd.cli.connect import use_cases
from opencode_memoryd.cli.exits import EXIT_OK, EXIT_USAGE
from opencode_memoryd.cli.failures import report

if TYPE_CHECKING:
    from opencode_memoryd.compose import App

#: The comment that carries the document's header in a Markdown export.
_HEADER = "<!-- opencode-memoryd-export "
#: The comment that carries one memory's payload in a Markdown export.
_MEMORY = "<!-- memory "
_MEMORY_LINE = re.compile(r"^\s*<!-- memory (\{.*\}) -->\s*$")
_HEADER_LINE = re.compile(r"^\s*<!-- opencode-memoryd-export (\{.*\}) -->\s*$")
#: Memories sent to the daemon per request (its control socket takes 1 MiB at most).
IMPORT_BATCH = 200


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``export`` and ``import`` to the CLI."""
    e = sub.add_parser("export", help=COMMANDS["export"],
                       description="Write every memory (forgotten and superseded ones too) "
                                   "with its provenance: when it was said, its sessions and "
                                   "messages, who asserted it, what superseded it. `import` "
                                   "reads either format back.")
    e.add_argument("--format", choices=("json", "markdown"), default="json",
                   help="json (default) or markdown (readable, with each memory's payload "
                        "in a comment)")
    e.add_argument("--output", "-o", metavar="FILE",
                   help="write to FILE (mode 0600) instead of stdout")
    e.set_defaults(handler=cmd_export)

    i = sub.add_parser("import", help=COMMANDS["import"],
                       description="Add the memories of an `export` file (JSON or Markdown) "
                                   "that the store does not hold yet; a memory already "
                                   "stored is left as it is, so a second import adds 0. An "
                                   "invalid file is refused whole, each problem named.")
    i.add_argument("file", metavar="FILE", help="an export file, or - for stdin")
    i.add_argument("--json", action="store_true",
                   help="print {memories, added, present, ids} as JSON")
    i.set_defaults(handler=cmd_import)


def to_markdown(doc: dict[str, Any]) -> str:
    """The export document as a Markdown page (see the module)."""
    header = {k: v for k, v in doc.items() if k != "memories"}
    out = ["# opencode-memoryd memories", "",
           f"{len(doc['memories'])} memories, exported {doc['exported_at']}.",
           _HEADER + json.dumps(header) + " -->"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for m in doc["memories"]:
        where = ("Your user scope" if m["scope"] == "user"
                 else f"Project {m.get('project_root') or m.get('project_id')}")
        groups.setdefault(where, []).append(m)
    for where, memories in groups.items():
        out += ["", f"## {where}", ""]
        for m in memories:
            said = str(m.get("said_at") or m.get("created_at") or "")[:10]
            status = "" if m.get("status", "active") == "active" else (
                f", {m.get('retired_reason') or 'retired'}"
                + (f" by {m['superseded_by']}" if m.get("superseded_by") else ""))
            text = " ".join(str(m["content"]).split())
            out.append(f"- **{m['type']}** {text} _(said {said}, "
                       f"{m.get('provenance') or m.get('source')}{status}; {m['id']})_")
            # `>` escaped: a text that holds `-->` cannot end the comment
            out.append("  " + _MEMORY + json.dumps(m).replace(">", "\\u003e") + " -->")
    return "\n".join(out) + "\n"


def from_markdown(text: str) -> dict[str, Any]:
    """The export document a Markdown export holds (its header and memory comments).

    Raises:
        ValueError: no header comment, or a comment that is not JSON.
    """
    header: dict[str, Any] | None = None
    memories: list[Any] = []
    for line in text.splitlines():
        if (found := _HEADER_LINE.match(line)) is not None:
            header = json.loads(found.group(1))
        elif (found := _MEMORY_LINE.match(line)) is not None:
            memories.append(json.loads(found.group(1)))
    if header is None:
        raise ValueError("no `<!-- opencode-memoryd-export {...} -->` header line")
    return {**header, "memories": memories}


def cmd_export(app: App, args: argparse.Namespace) -> int:
    """``export [--format json|markdown] [--output FILE]``."""
    doc = use_cases(app).export()
    text = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n" if args.format == "json"
            else to_markdown(doc))
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    path = Path(args.output).expanduser()
    path.write_text(text, encoding="utf-8")  # the umask 077: mode 0600
    print(f"exported {len(doc['memories'])} memories to {path}", file=sys.stderr)
    return EXIT_OK


def cmd_import(app: App, args: argparse.Namespace) -> int:
    """``import FILE``: exit 2 when the file cannot be read or is not a valid export
    (nothing imported); the memories go to a running daemon :data:`IMPORT_BATCH` at a
    time, to the local use case all at once.

    Raises:
        RequestError: the document is invalid (each problem named).
    """
    try:
        text = (sys.stdin.read() if args.file == "-"
                else Path(args.file).expanduser().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        return report(f"import: cannot read {args.file}: {exc}", EXIT_USAGE, args.json)
    try:
        doc: Any = (json.loads(text) if text.lstrip().startswith("{")
                    else from_markdown(text))
    except ValueError as exc:
        return report(f"import: {args.file} is not an export (JSON or Markdown): {exc}; "
                      "nothing was imported", EXIT_USAGE, args.json)
    from opencode_memoryd.usecases.transfer import check_document

    check_document(doc)  # the whole file, before anything is written
    result = {"memories": 0, "added": 0, "present": 0, "ids": []}
    memories = doc["memories"]
    step = IMPORT_BATCH if app.daemon_socket() is not None else max(len(memories), 1)
    for at in range(0, max(len(memories), 1), step):  # a request to the daemon stays small
        part = use_cases(app).import_memories(
            document={**doc, "memories": memories[at:at + step]})
        for key in ("memories", "added", "present", "ids"):
            result[key] += part[key]
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"imported {result['added']} of {result['memories']} memories "
              f"({result['present']} already stored)")
    return EXIT_OK

"""Short digests of texts that are not user statements: a compaction summary.

Pure text functions, no LLM:

* :func:`condense_summary`: an OpenCode compaction summary (Markdown headings and bullet
  lists) as one paragraph: ``Heading: item; item. Next heading: …``, empty headings and
  ``(none)`` items left out;
* :func:`cap`: a text cut to a length at a sentence or word boundary.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|!\[[^\]]*\]\[[^\]]*\]")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)|\[([^\]]+)\]\[[^\]]*\]")
_HTML = re.compile(r"<[^>]+>")
_EMPHASIS = re.compile(r"(?<!\w)(\*\*|__|\*|_|~~)(?=\S)(.+?)(?<=\S)\1(?!\w)")
_CODE = re.compile(r"`([^`]+)`")
_REST_ROLE = re.compile(r":\w+:`([^`]+)`")
_REST_LINK = re.compile(r"`([^`<]+?)\s*<[^>]+>`_+")
_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def _inline(text: str) -> str:
    """Markdown/reST inline markup reduced to its text (code spans kept verbatim)."""
    t = _IMAGE.sub("", text)
    t = _REST_LINK.sub(r"\1", t)
    t = _REST_ROLE.sub(r"\1", t)
    t = _LINK.sub(lambda m: m.group(1) or m.group(2) or "", t)
    t = _HTML.sub("", t)
    t = t.replace("``", "`")
    spans: list[str] = []

    def _hold(m: re.Match[str]) -> str:
        spans.append(m.group(1))
        return f"\x00{len(spans) - 1}\x00"

    t = _CODE.sub(_hold, t)
    for _ in range(2):
        t = _EMPHASIS.sub(r"\2", t)
    t = re.sub("\x00(\\d+)\x00", lambda m: spans[int(m.group(1))], t)
    return " ".join(t.split())


_MD_HEADING = re.compile(r"^\s*#{1,6}\s+(.*?)\s*#*\s*$")
_NONE_ITEM = re.compile(r"^\(?\s*(none|n/?a|nothing|-)\s*\)?\.?$", re.IGNORECASE)


#: Headings of a compaction summary kept as the title of their items (lower case, without
#: a trailing colon); any other heading is the model's prose and is left out.
SUMMARY_HEADINGS = frozenset({
    "goal", "goals", "objective", "objectives", "task", "tasks", "progress", "done",
    "completed", "status", "current state", "state", "next steps", "next", "remaining",
    "todo", "open questions", "open problems", "blockers", "decisions", "key decisions",
    "context", "summary", "files", "files changed", "files modified", "changes",
    "constraints", "discoveries", "accomplished", "relevant files",
})


def condense_summary(text: str, *, max_chars: int,
                     keep: Callable[[str], str] | None = None) -> str:
    """A compaction summary as one paragraph, cut to ``max_chars`` (see the module
    docstring); ``""`` when it holds no text. ``keep``: when given, each item (a list
    item, a line) is replaced by what it returns for it (``""``: left out), and only the
    headings in :data:`SUMMARY_HEADINGS` are shown."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if not line or _FENCE.match(line):
            continue
        heading = _MD_HEADING.match(line)
        if heading:
            title = _inline(heading.group(1)).rstrip(":")
            if keep is not None and title.lower() not in SUMMARY_HEADINGS:
                title = ""
            sections.append((title, []))
            continue
        item = _inline(_LIST.sub("", line))
        if item and not _NONE_ITEM.match(item) and keep is not None:
            item = keep(item)
        if item and not _NONE_ITEM.match(item):
            sections[-1][1].append(item.rstrip(";"))
    out = []
    for title, items in sections:
        if not items:
            continue
        body = "; ".join(items)
        if body[-1] not in ".!?":
            body += "."
        out.append(f"{title}: {body}" if title else body)
    return cap(" ".join(out), max_chars)


def cap(text: str, max_chars: int) -> str:
    """``text`` (whitespace collapsed) cut to at most ``max_chars`` characters: at the last
    sentence end that keeps at least half of it, else at a word boundary, with ``…``."""
    t = " ".join(text.split())
    if len(t) <= max_chars:
        return t
    cut = t[: max(max_chars - 1, 1)]
    ends = [m.end() for m in _SENTENCE_END.finditer(cut)]
    if ends and ends[-1] >= max_chars // 2:
        return cut[: ends[-1]]
    space = cut.rfind(" ")
    if t[len(cut)] != " " and space >= max_chars // 2:  # do not keep half a word
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"

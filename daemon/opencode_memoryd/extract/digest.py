"""Short digests of texts that are not user statements: a README, a compaction summary.

Pure text functions, no LLM:

* :func:`first_paragraph`: the first substantive paragraph of a README (Markdown, reST or
  plain text): headings, badges, images, HTML, link-only lines, code blocks, tables, front
  matter, tables of contents and one-line taglines are skipped; inline Markdown is reduced
  to its text;
* :func:`condense_summary`: an OpenCode compaction summary (Markdown headings and bullet
  lists) as one paragraph: ``Heading: item; item. Next heading: …``, empty headings and
  ``(none)`` items left out;
* :func:`cap`: a text cut to a length at a sentence or word boundary.
"""

from __future__ import annotations

import re

#: The fewest words a README paragraph needs to count as substantive.
MIN_PARAGRAPH_WORDS = 8

_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)|!\[[^\]]*\]\[[^\]]*\]")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)|\[([^\]]+)\]\[[^\]]*\]")
_HTML = re.compile(r"<[^>]+>")
_EMPHASIS = re.compile(r"(?<!\w)(\*\*|__|\*|_|~~)(?=\S)(.+?)(?<=\S)\1(?!\w)")
_CODE = re.compile(r"`([^`]+)`")
_REST_ROLE = re.compile(r":\w+:`([^`]+)`")
_REST_LINK = re.compile(r"`([^`<]+?)\s*<[^>]+>`_+")
_HEADING_UNDERLINE = re.compile(r"^([=\-~^\"'`#*+]){3,}\s*$")
_REF_DEF = re.compile(r"^\s*\[[^\]]+\]:\s*\S+")
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


def _blocks(text: str) -> list[list[str]]:
    """Paragraphs of prose lines: fenced and indented code, front matter, headings,
    tables, list items, HTML and reference definitions end a paragraph and are dropped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[0].strip() in ("---", "+++"):  # front matter
        end = next((i for i, x in enumerate(lines[1:], 1) if x.strip() == lines[0].strip()),
                   0)
        lines = lines[end + 1:]
    blocks: list[list[str]] = []
    cur: list[str] = []
    fence = False
    in_comment = False
    for i, raw in enumerate(lines):
        line = raw.rstrip()
        stripped = line.strip()
        if in_comment:
            in_comment = "-->" not in stripped
            continue
        if stripped.startswith("<!--"):
            in_comment = "-->" not in stripped
            continue
        if _FENCE.match(line):
            fence = not fence
            cur = _flush(blocks, cur)
            continue
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        skip = (fence or not stripped or stripped.startswith(("#", "|", "<", ">", "..", ":"))
                or _HEADING_UNDERLINE.match(stripped) or _REF_DEF.match(stripped)
                or _LIST.match(line) or raw.startswith(("    ", "\t"))
                or (_HEADING_UNDERLINE.match(nxt) and len(nxt) >= len(stripped) * 0.6))
        if skip:
            cur = _flush(blocks, cur)
            continue
        cur.append(stripped)
    _flush(blocks, cur)
    return blocks


def _flush(blocks: list[list[str]], cur: list[str]) -> list[str]:
    if cur:
        blocks.append(cur)
    return []


def _substantive(text: str) -> bool:
    words = re.findall(r"[^\W\d_][\w'-]*", text)
    if len(words) < MIN_PARAGRAPH_WORDS:
        return False
    visible = [c for c in text if not c.isspace()]
    return sum(c.isalpha() for c in visible) >= len(visible) * 0.6


def first_paragraph(readme: str, *, max_chars: int) -> str:
    """The first substantive paragraph of a README, inline markup removed, whitespace
    collapsed, cut to ``max_chars`` (:func:`cap`); ``""`` when there is none.

    A paragraph is substantive when it has at least :data:`MIN_PARAGRAPH_WORDS` words and
    is mostly letters (not a line of badges, links or a command).
    """
    for block in _blocks(readme):
        text = _inline(" ".join(block))
        if _substantive(text):
            return cap(text, max_chars)
    return ""


_MD_HEADING = re.compile(r"^\s*#{1,6}\s+(.*?)\s*#*\s*$")
_NONE_ITEM = re.compile(r"^\(?\s*(none|n/?a|nothing|-)\s*\)?\.?$", re.IGNORECASE)


def condense_summary(text: str, *, max_chars: int) -> str:
    """A compaction summary as one paragraph, cut to ``max_chars`` (see the module
    docstring); ``""`` when it holds no text."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if not line or _FENCE.match(line):
            continue
        heading = _MD_HEADING.match(line)
        if heading:
            sections.append((_inline(heading.group(1)).rstrip(":"), []))
            continue
        item = _inline(_LIST.sub("", line))
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

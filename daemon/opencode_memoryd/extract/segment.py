"""Cut one human message into the sentences the rules extractor parses.

The message is normalised (curly quotes, non-breaking spaces, the ellipsis character),
then read line by line: fenced code blocks, indented code, quoted lines (``> …``), pasted
transcript lines (``Assistant: …``), logs, stack traces, code, comments, configuration
lines and shell prompts are **barriers**: never a source of directives, and no anaphora
reaches across them. The text that remains is prose; a line that continues the one before
(no sentence end, a lowercase start) is joined to it with its newline kept (the grammar
treats a newline as a clause boundary), and a list item is its own unit.

Prose is cut into sentences at ``.``, ``!`` and ``?`` followed by white space, but never
inside a **masked** span: code spans, URLs, e-mail addresses, quoted text, and
abbreviations (``e.g.``, ``i.e.``, ``etc.`` before a lowercase word, ``vs.``, ``Dr.``, …).
Version numbers and file names (``3.9``, ``config.yaml``) hold no white space after their
dots, so they are never cut either; an ellipsis before a lowercase word is no sentence end.
Each sentence comes with a masked copy of the same length in which masked spans are
:data:`MASK` characters, so the grammar never finds a trigger inside a quotation or code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

#: The character that stands for a masked (quoted, code, URL) character in
#: :attr:`Unit.masked`; neither a word character nor white space.
MASK = "\ue000"

_NORMALISE = str.maketrans({
    "\u2018": "'", "\u2019": "'", "\u201b": "'", "\u00b4": "'", "\u2032": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"',
    "\u00a0": " ", "\u2007": " ", "\u202f": " ", "\u2009": " ", "\t": "    ",
    "\r": "\n", "\u2028": "\n", "\u2029": "\n",
})


_EMPHASIS = re.compile(r"(\*\*)(?=\S)(.+?)(?<=\S)\1"
                       r"|(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=\S)\*(?![\w*])")


def normalise(text: str) -> str:
    """Straight quotes and apostrophes, plain spaces, ``...`` for the ellipsis character,
    ``\\n`` line ends, tabs as four spaces, Markdown emphasis (``**Remember:**``) dropped."""
    text = text.replace("\r\n", "\n").translate(_NORMALISE).replace("\u2026", "...")
    return _EMPHASIS.sub(lambda x: x.group(2) or x.group(3) or "", text)


# --- lines that are not prose -------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_FOREIGN_ANY_CASE = re.compile(
    r"""^\s*(?:
        >                                             # a quotation
      | (?:assistant|ai|bot|claude|chatgpt|gpt[\w.-]*|copilot|gemini|model|agent|opencode
           |system|llm|user|human)\s*:                # a pasted transcript line
      | (?:\$|%|>>>|PS\s[^>]*>)\s                    # shell and REPL prompts
      | //|/\*|\*/|\#|<!--|--\s|;;                    # comments and headings
      | </?[A-Za-z][\w:-]*(?:\s[^>]*)?/?>             # markup
      | \||\+\+\+\s|diff\s--git|@@\s                 # tables and diffs
      | ["\[{].*[\]},]\s*$                            # JSON
    )""",
    re.VERBOSE | re.IGNORECASE,
)
_FOREIGN_CASED = re.compile(
    r"""^\s*(?:
        \[?\d{4}-\d{2}-\d{2}[T\s]\d | \[?\d{1,2}:\d{2}:\d{2}      # log timestamps
      | \[?(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|FATAL|CRITICAL|PANIC)\b
      | \w*(?:Error|Exception|Warning): | Traceback\b | File\s" | at\s+[\w.$<>]+\(
      | npm\s+(?:ERR|WARN)!? | (?:error|warning|fatal|panic)(?:\[\w+\])?:
      | def\s+\w+\s*\( | class\s+\w+\s*[(:{<] | function\s*\w*\s*\(
      | (?:const|let|var)\s+[\w{\[]+.*= | import\s+[\w{*].*\bfrom\b | from\s+[\w.]+\s+import\b
      | (?:import|package|using)\s+[\w.]+;?$ | \#include | return\b.*;$
      | (?:if|for|while|switch)\s*\( | }\s*else\b
      | [\w.\[\]"'-]+\s*[-+*/|&]?=\s*\S               # an assignment or key=value
      | [\w.-]*[_.][\w.-]*\s*:\s*\S                   # a configuration key (snake_case: …)
    )""",
    re.VERBOSE,
)
_CODE_END = re.compile(r"[{};]\s*$|^\s*[)\]}]")
_INTRODUCER = re.compile(
    r"""\b(?:said|says|wrote|writes|replied|answered|responded|commented|posted|asked
        |log|logs|output|error|errors|trace|traceback|config|snippet|code|message|diff
        |answer|reply|response|file)\b[^:]{0,40}:\s*$""",
    re.VERBOSE | re.IGNORECASE,
)
_MEMORY_WORD = re.compile(r"remem|\bmind\b|\bnote\b|forget|future|\bmemor", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022+\u2013]|\d{1,2}[.)]|[a-hA-H][.)])\s+")
_SENTENCE_END_BEFORE_BREAK = re.compile(r"""[.!?:;]["')\]]*\s*$""")


@dataclass(frozen=True, slots=True)
class Unit:
    """One sentence of prose, or a barrier (code, a log, a quotation) between sentences.

    Attributes:
        kind: ``sentence`` or ``barrier`` (a barrier has no text).
        text: the sentence, normalised (:func:`normalise`), without its list marker; may
            hold newlines (a line continued on the next).
        masked: ``text`` with every masked character replaced by :data:`MASK`; the same
            length as ``text``.
        bullet: the sentence opens a list item (``- …``, ``1. …``, ``a) …``).
        item: the sentence belongs to a list item (the first or a later sentence of it).
    """

    kind: Literal["sentence", "barrier"]
    text: str = ""
    masked: str = ""
    bullet: bool = False
    item: bool = False


_CONFIG_LINE = re.compile(
    r"""^\s*(?P<key>[\w-]+):\s*(?:true|false|yes|no|on|off|null|~|-?\d[\d.]*|"[^"]*"|'[^']*'
        |\[.*\]|\{.*\})\s*$""", re.VERBOSE | re.IGNORECASE)


def _is_foreign(line: str) -> bool:
    if _FOREIGN_ANY_CASE.match(line) or _FOREIGN_CASED.match(line):
        return True
    if (x := _CONFIG_LINE.match(line)) and not _MEMORY_WORD.search(x.group("key")):
        return True  # "remember: true", but not 'Remember: "never push on Fridays"'
    return bool(_CODE_END.search(line)) and not _MEMORY_WORD.search(line)


def _blocks(text: str) -> list[tuple[str, str, bool] | None]:
    """Prose chunks ``(text, masked, bullet)`` in order, ``None`` for a barrier, with
    continuation lines joined and blank lines dropped."""
    out: list[tuple[str, str, bool] | None] = []
    fenced = quoting = False
    prev_blank = True
    open_chunk: list[str] | None = None  # [text, bullet flag as "1"/""]
    for raw in text.split("\n"):
        line = raw.rstrip()
        if _FENCE.match(line):
            fenced = not fenced
            quoting = False
            _barrier(out)
            open_chunk = None
            continue
        blank = not line.strip()
        if fenced or (quoting and not blank):
            _barrier(out)
            open_chunk = None
            prev_blank = blank
            continue
        quoting = False
        if blank:
            open_chunk = None
            prev_blank = True
            continue
        indented = raw.startswith("    ") and not _BULLET.match(line)
        if _is_foreign(line) or (indented and (prev_blank or (out and out[-1] is None))):
            _barrier(out)
            open_chunk = None
            prev_blank = False
            continue
        prev_blank = False
        bullet = _BULLET.match(line)
        body = line[bullet.end():] if bullet else line.strip()
        if (open_chunk is not None and not bullet and body[:1].islower()
                and not _SENTENCE_END_BEFORE_BREAK.search(open_chunk[0])):
            open_chunk[0] += "\n" + body
            out[-1] = (open_chunk[0], "", bool(open_chunk[1]))
        else:
            open_chunk = [body, "1" if bullet else ""]
            out.append((body, "", bool(bullet)))
        if _INTRODUCER.search(line) and not _MEMORY_WORD.search(line):
            quoting = True
            open_chunk = None
    return out


def _barrier(out: list[tuple[str, str, bool] | None]) -> None:
    if not out or out[-1] is not None:
        out.append(None)


# --- masking ------------------------------------------------------------------------------

_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_URL = re.compile(r"""(?:\b(?:https?|ftp|file|ssh|git)://|\bwww\.|\bgit@[\w.-]+:)[^\s<>"'`]+""")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_DQUOTE = re.compile(r'"[^"\n]{1,400}"')
_SQUOTE = re.compile(r"(?<![\w'])'[^'\n]{1,200}'(?![\w])")
_ABBREV = re.compile(
    r"""(?<![\w.])(?:e\.g|i\.e|vs|cf|viz|a\.k\.a|w\.r\.t|mr|mrs|ms|dr|prof|st|sr|jr
        |a\.m|p\.m|u\.s|u\.k|e\.u|ph\.d|n\.b|p\.s)\.""",
    re.VERBOSE | re.IGNORECASE,
)
_SOFT_ABBREV = re.compile(
    r"""(?<![\w.])(?:etc|approx|incl|excl|esp|resp|max|min|avg|no|nr|fig|ca|est|misc|co|inc
        |ltd|al|ver|dept|sec|mins|hrs)\.(?=\s+(?-i:[a-z0-9(]))""",
    re.VERBOSE | re.IGNORECASE,
)
_URL_TRAIL = ".,;:!?)]'\""


def _mask(text: str) -> str:
    chars = list(text)

    def cover(start: int, end: int) -> None:
        for i in range(start, end):
            chars[i] = MASK

    for m in _CODE_SPAN.finditer(text):
        cover(m.start(2), m.end(2))
    for rx in (_URL, _EMAIL):
        for m in rx.finditer(text):
            url = m.group(0)
            end = m.end() - (len(url) - len(url.rstrip(_URL_TRAIL)))
            cover(m.start(), end)
    for rx in (_ABBREV, _SOFT_ABBREV):
        for m in rx.finditer(text):
            cover(m.start(), m.end())
    masked = "".join(chars)
    for rx in (_DQUOTE, _SQUOTE):
        for m in rx.finditer(masked):
            cover(m.start() + 1, m.end() - 1)
        masked = "".join(chars)
    return masked


# --- sentences ----------------------------------------------------------------------------

_STOP = re.compile(r"""[.!?]+["')\]]*(?=\s|$)""")


def _split(text: str, masked: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    start = 0
    for m in _STOP.finditer(masked):
        rest = masked[m.end():].lstrip()
        if ".." in m.group(0) and rest[:1].islower():
            continue
        out.append((text[start:m.end()], masked[start:m.end()]))
        start = m.end()
    out.append((text[start:], masked[start:]))
    return [(t.strip(), mk.strip()) for t, mk in out if t.strip()]


def units(message: str) -> list[Unit]:
    """The sentences and barriers of one human message, in order (see the module doc)."""
    out: list[Unit] = []
    for block in _blocks(normalise(message)):
        if block is None:
            if out and out[-1].kind != "barrier":
                out.append(Unit("barrier"))
            continue
        body, _, bullet = block
        for i, (text, masked) in enumerate(_split(body, _mask(body))):
            out.append(Unit("sentence", text, masked, bullet=bullet and i == 0, item=bullet))
    return out

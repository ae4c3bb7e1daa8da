"""Edits to JSONC text (JSON with comments and trailing commas) that keep everything else.

OpenCode's config files are JSONC: JSON plus ``//`` and ``/* */`` comments and trailing
commas in objects and arrays (OpenCode parses them with Microsoft's ``jsonc-parser``,
``allowTrailingComma``). The Python libraries that read JSONC either drop the comments or
re-serialise the whole document, so this module edits the text itself: a scanner splits
it into tokens (strings with their escapes, comments, punctuation, bare words and
whitespace), a small parser finds the spans of objects and members, and an edit inserts,
replaces or removes exactly one member. Every byte outside the edited span is kept, and
the inserted text follows the file's newline (``\\r\\n`` or ``\\n``), its indentation
(spaces or tabs) and its trailing-comma style.

:func:`set_member` followed by :func:`remove_member` of the same member gives back the
original text, byte for byte, when the member did not exist before and the object it went
into had other members or did not exist (an object left empty becomes ``{}``, and one on
the path below the top level, such as ``"mcp": {}``, is removed).

Errors: every function raises :class:`ValueError` with a ``line L, column C`` position
when the text is not JSONC, or when a path goes through a value that is not an object.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["loads", "remove_member", "set_member"]

_PUNCT = "{}[]:,"
_SPACE = " \t\r\n"


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "string", "comment", "punct", "word" or "space"
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _Member:
    key: str
    key_start: int
    value: _Value
    comma_end: int | None  # the end of the comma after the value, when there is one


@dataclass(frozen=True, slots=True)
class _Value:
    start: int  # an object's "{"
    end: int  # just after an object's "}"
    members: tuple[_Member, ...] | None  # None: not an object


def _where(text: str, pos: int) -> str:
    return f"line {text.count(chr(10), 0, pos) + 1}, column {pos - text.rfind(chr(10), 0, pos)}"


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        kind, end = _scan(text, i)
        tokens.append(_Token(kind, i, end))
        i = end
    return tokens


def _scan(text: str, i: int) -> tuple[str, int]:
    """The kind and the end of the token that starts at ``i``."""
    n, c = len(text), text[i]
    if c in _SPACE:
        end = i
        while end < n and text[end] in _SPACE:
            end += 1
        return "space", end
    if c == '"':
        return "string", _string_end(text, i)
    if text.startswith(("//", "/*"), i):
        return "comment", _comment_end(text, i)
    if c in _PUNCT:
        return "punct", i + 1
    end = i
    while end < n and text[end] not in _SPACE and text[end] not in _PUNCT + '"/':
        end += 1
    if end == i:
        raise ValueError(f"unexpected {c!r} at {_where(text, i)}")
    return "word", end


def _string_end(text: str, i: int) -> int:
    """The end (exclusive) of the string whose opening quote is at ``i``.

    Raises:
        ValueError: a line break inside it, or no closing quote.
    """
    n, end = len(text), i + 1
    while end < n and text[end] != '"':
        if text[end] in "\r\n":
            raise ValueError(f"line break inside a string at {_where(text, end)}")
        end += 2 if text[end] == "\\" else 1
    if end >= n:
        raise ValueError(f"unterminated string at {_where(text, i)}")
    return end + 1


def _comment_end(text: str, i: int) -> int:
    """The end (exclusive) of the ``//`` or ``/* */`` comment that starts at ``i``.

    Raises:
        ValueError: a ``/*`` comment that is not closed.
    """
    if text.startswith("//", i):
        end = i
        while end < len(text) and text[end] not in "\r\n":
            end += 1
        return end
    close = text.find("*/", i + 2)
    if close < 0:
        raise ValueError(f"unterminated comment at {_where(text, i)}")
    return close + 2


class _Parser:
    """Recursive descent over the significant tokens; records objects' member spans."""

    def __init__(self, text: str, tokens: list[_Token]) -> None:
        self.text = text
        self.tokens = [t for t in tokens if t.kind not in ("space", "comment")]
        self.i = 0

    def _peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self, what: str) -> _Token:
        tok = self._peek()
        if tok is None:
            raise ValueError(f"the text ends where {what} was expected")
        self.i += 1
        return tok

    def _is(self, tok: _Token | None, punct: str) -> bool:
        return tok is not None and tok.kind == "punct" and self.text[tok.start] == punct

    def fail(self, tok: _Token, what: str) -> ValueError:
        found = self.text[tok.start:tok.end][:20]
        return ValueError(f"expected {what} at {_where(self.text, tok.start)}, found {found!r}")

    def value(self) -> _Value:
        tok = self._take("a value")
        if self._is(tok, "{"):
            return self._object(tok)
        if self._is(tok, "["):
            self._array()
            return _Value(tok.start, self.tokens[self.i - 1].end, None)
        if tok.kind in ("string", "word"):
            return _Value(tok.start, tok.end, None)
        raise self.fail(tok, "a value")

    def _object(self, open_tok: _Token) -> _Value:
        members: list[_Member] = []
        while True:
            tok = self._take("a key or '}'")
            if self._is(tok, "}"):
                return _Value(open_tok.start, tok.end, tuple(members))
            if tok.kind != "string":
                raise self.fail(tok, "a key or '}'")
            key = json.loads(self.text[tok.start:tok.end])
            colon = self._take("':'")
            if not self._is(colon, ":"):
                raise self.fail(colon, "':'")
            value = self.value()
            after = self._take("',' or '}'")
            comma = self._is(after, ",")
            if not comma and not self._is(after, "}"):
                raise self.fail(after, "',' or '}'")
            if not comma:
                self.i -= 1  # the "}" closes the object on the next round
            members.append(_Member(key, tok.start, value, after.end if comma else None))

    def _array(self) -> None:
        while True:
            if self._is(self._peek(), "]"):
                self.i += 1
                return
            self.value()
            after = self._take("',' or ']'")
            if self._is(after, "]"):
                return
            if not self._is(after, ","):
                raise self.fail(after, "',' or ']'")


def _parse(text: str) -> tuple[list[_Token], _Value | None]:
    """The tokens of ``text`` and its top-level value (``None``: no value, only comments)."""
    tokens = _tokenize(text)
    parser = _Parser(text, tokens)
    value = parser.value() if parser.tokens else None
    if parser.i < len(parser.tokens):
        raise parser.fail(parser.tokens[parser.i], "the end of the text")
    return tokens, value


def loads(text: str) -> object:
    """The value of a JSONC document, as :func:`json.loads` gives it for plain JSON.

    Comments and trailing commas are dropped before decoding; for duplicate keys the
    last one wins, as in ``jsonc-parser``. A text with no value (empty, or only comments
    and whitespace) gives ``None``.

    Raises:
        ValueError: ``text`` is not JSONC.
    """
    tokens, value = _parse(text)
    if value is None:
        return None
    pieces = [text[t.start:t.end] for t in tokens if t.kind not in ("space", "comment")]
    kept = [p for p, after in zip(pieces, [*pieces[1:], ""], strict=True)
            if not (p == "," and after in ("}", "]"))]  # trailing commas
    return json.loads(" ".join(kept))


# --------------------------------------------------------------------------------------
# Layout helpers
# --------------------------------------------------------------------------------------


def _line_start(text: str, pos: int) -> int:
    return max(text.rfind("\n", 0, pos), text.rfind("\r", 0, pos)) + 1


def _indent_of(text: str, pos: int) -> str:
    start = end = _line_start(text, pos)
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def _starts_line(text: str, pos: int) -> bool:
    return not text[_line_start(text, pos):pos].strip(" \t")


def _tail_end(text: str, tokens: list[_Token], pos: int) -> int:
    """``pos``, moved past the comments that follow it on the same line."""
    index = next((k for k, t in enumerate(tokens) if t.start == pos), len(tokens))
    end = pos
    for tok in tokens[index:]:
        if tok.kind == "space" and not any(c in "\r\n" for c in text[tok.start:tok.end]):
            continue
        if tok.kind != "comment":
            break
        end = tok.end
    return end


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _indent_unit(text: str, root: _Value | None) -> str:
    if root and root.members and _starts_line(text, root.members[0].key_start):
        unit = _indent_of(text, root.members[0].key_start)[len(_indent_of(text, root.start)):]
        if unit:
            return unit
    return "  "


def _render(value: object, *, indent: str | None, unit: str, nl: str) -> str:
    """``value`` as JSON; objects one member a line, indented from ``indent`` (None: one line).

    Arrays stay on one line, as in OpenCode's own examples (``"command": ["x", "mcp"]``).
    """
    if indent is None or not isinstance(value, dict) or not value:
        return json.dumps(value, ensure_ascii=False)
    inner = indent + unit
    members = ",".join(
        nl + inner + _render_member(str(k), v, indent=inner, unit=unit, nl=nl)
        for k, v in value.items()
    )
    return "{" + members + nl + indent + "}"


def _render_member(key: str, value: object, *, indent: str | None, unit: str, nl: str) -> str:
    body = _render(value, indent=indent, unit=unit, nl=nl)
    return f"{json.dumps(key, ensure_ascii=False)}: {body}"


def _apply(text: str, edits: Sequence[tuple[int, int, str]]) -> str:
    """``text`` with each ``(start, end, replacement)`` applied; the spans must not overlap.

    Of two insertions at the same place, the one listed first ends up last in the text.
    """
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _find(text: str, root: _Value | None, path: Sequence[str]) -> list[_Value]:
    """The objects along ``path``: the root, then each one that exists (at most len(path))."""
    if root is None or root.members is None:
        raise ValueError("the top-level value is not an object")
    chain = [root]
    for depth in range(len(path) - 1):
        member = _member(chain[-1], path, depth)
        if member is None:
            break
        if member.value.members is None:
            raise ValueError(f"{'.'.join(path[:depth + 1])!r} is not an object")
        chain.append(member.value)
    return chain


def _member(obj: _Value, path: Sequence[str], depth: int) -> _Member | None:
    """The member ``path[depth]`` of ``obj``, the object at ``path[:depth]``."""
    found = [m for m in obj.members or () if m.key == path[depth]]
    if len(found) > 1:
        raise ValueError(f"duplicate key {'.'.join(path[:depth + 1])!r}")
    return found[0] if found else None


# --------------------------------------------------------------------------------------
# Edits
# --------------------------------------------------------------------------------------


def set_member(text: str, path: Sequence[str], value: object) -> str:
    """``text`` with the member at ``path`` (keys from the top-level object) set to ``value``.

    An existing member keeps its key and its place; only its value is rewritten. A new
    member goes after the last member of its object, creating the missing objects on the
    way; a document with no value (empty, or only comments) gets a new top-level object
    after its comments. ``value`` must be JSON-serialisable.

    Raises:
        ValueError: ``text`` is not JSONC, the top-level value or a value on the path is
            not an object, or a key on the path appears twice in its object.
    """
    if not path:
        raise ValueError("empty path")
    nl = _newline(text)
    tokens, root = _parse(text)
    if root is None:  # empty, or only comments: they stay, the new object follows them
        nested: object = value
        for key in reversed(path):
            nested = {key: nested}
        rendered = _render(nested, indent="", unit="  ", nl=nl) + nl
        if not text.strip(_SPACE):
            return rendered
        return text + ("" if text.endswith(("\n", "\r")) else nl) + rendered
    unit = _indent_unit(text, root)
    chain = _find(text, root, path)
    obj, depth = chain[-1], len(chain) - 1
    key = path[depth]
    existing = _member(obj, path, depth) if depth == len(path) - 1 else None
    if existing is not None:
        indent = (_indent_of(text, existing.key_start)
                  if _starts_line(text, existing.key_start) else None)
        body = _render(value, indent=indent, unit=unit, nl=nl)
        return _apply(text, [(existing.value.start, existing.value.end, body)])
    for missing in reversed(path[depth + 1:]):
        value = {missing: value}
    return _apply(text, _insertion(text, tokens, obj, key, value, unit=unit, nl=nl))


def _insertion(text: str, tokens: list[_Token], obj: _Value, key: str, value: object, *,
               unit: str, nl: str) -> list[tuple[int, int, str]]:
    members = obj.members or ()
    if members:
        last = members[-1]
        tail = _tail_end(text, tokens, last.comma_end or last.value.end)
        if _starts_line(text, members[0].key_start):
            indent = _indent_of(text, members[0].key_start)
            piece = nl + indent + _render_member(key, value, indent=indent, unit=unit, nl=nl)
        else:
            piece = " " + _render_member(key, value, indent=None, unit=unit, nl=nl)
        edits = [(tail, tail, piece + ("," if last.comma_end else ""))]
        if last.comma_end is None:
            edits.append((last.value.end, last.value.end, ","))
        return edits
    outer = _indent_of(text, obj.start)
    indent = outer + unit
    piece = nl + indent + _render_member(key, value, indent=indent, unit=unit, nl=nl)
    inside = [t for t in tokens if obj.start < t.start < obj.end - 1]
    comments = [t for t in inside if t.kind == "comment"]
    if not comments:
        return [(obj.start + 1, obj.end - 1, piece + nl + outer)]
    anchor = comments[-1].end
    closing = "" if any(c in "\r\n" for c in text[anchor:obj.end - 1]) else nl + outer
    return [(anchor, anchor, piece + closing)]


def remove_member(text: str, path: Sequence[str]) -> str:
    """``text`` without the member at ``path``; unchanged when there is no such member.

    The member's lines go, and so does the comma that only it needed. An object on the
    path (not the top-level one) that is left with no members and no comments is removed
    as well, so removing what :func:`set_member` added restores the original text.

    Raises:
        ValueError: as :func:`set_member`.
    """
    if not path:
        raise ValueError("empty path")
    tokens, root = _parse(text)
    chain = _find(text, root, path)
    if len(chain) < len(path):
        return text
    obj = chain[-1]
    member = _member(obj, path, len(path) - 1)
    if member is None:
        return text
    members = obj.members or ()
    index = members.index(member)
    previous = members[index - 1] if index else None
    # From the end of whatever precedes the key ("{", a comma, a value or a comment, which
    # all stay) to the end of the member's line; a "//" comment keeps its line break.
    before = [t for t in tokens if t.end <= member.key_start and t.kind != "space"][-1]
    anchor = before.end
    end = _tail_end(text, tokens, member.comma_end or member.value.end)
    if text.startswith("//", before.start) and text[end:end + 1] not in ("\r", "\n", ""):
        anchor += 2 if text.startswith("\r\n", anchor) else 1
    edits = [(anchor, end, "")]
    if member is members[-1] and member.comma_end is None and previous and previous.comma_end:
        edits.append((previous.comma_end - 1, previous.comma_end, ""))
    rest = text[obj.start + 1:anchor] + text[end:obj.end - 1]
    if len(members) == 1 and not rest.strip(_SPACE):
        edits = [(obj.start + 1, obj.end - 1, "")]  # nothing else was inside: "{}"
    text = _apply(text, edits)
    if len(path) > 1:
        tokens, root = _parse(text)
        parent = _find(text, root, path)[-1]
        inside = text[parent.start + 1:parent.end - 1]
        if not parent.members and not inside.strip(_SPACE):
            text = remove_member(text, path[:-1])
    return text

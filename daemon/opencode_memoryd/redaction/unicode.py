"""Invisible Unicode: characters a reader does not see but a model reads.

Tag characters (U+E0000-U+E007F) spell ASCII invisibly ("ASCII smuggling": an instruction
hidden in a tool output or a pasted text), zero-width characters split words so that a
filter misses them, and bidirectional controls reorder what is displayed. None of them
carries meaning in a coding transcript or a memory, so :func:`strip_invisible` removes
them before text reaches a model or the store.

Removed:

* tag characters U+E0000-U+E007F;
* zero-width and invisible formatting: U+200B-U+200F (zero-width space, non-joiner,
  joiner, left-to-right and right-to-left marks), U+2060-U+2064 (word joiner, invisible
  operators), U+FEFF (zero-width no-break space, byte-order mark), U+180E (Mongolian
  vowel separator), U+00AD (soft hyphen);
* bidirectional controls U+202A-U+202E (embeddings, overrides, pop) and U+2066-U+2069
  (isolates).

The function is pure and keeps every other character, line breaks included.
"""

from __future__ import annotations

import re

__all__ = ["INVISIBLE_RE", "strip_invisible"]

#: One invisible character (see the module docstring for the list).
INVISIBLE_RE = re.compile(
    "[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\U000e0000-\U000e007f]"
)


def strip_invisible(text: str) -> str:
    """``text`` without invisible Unicode characters (tag, zero-width, bidi controls).

    Args:
        text: any text.

    Returns:
        The same string object when there is nothing to remove, else a new string.

    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"strip_invisible() expects str, not {type(text).__name__}")
    if text.isascii():
        return text
    return INVISIBLE_RE.sub("", text)

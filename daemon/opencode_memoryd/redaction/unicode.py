"""Invisible Unicode: characters a reader does not see but a model reads.

Tag characters (U+E0000-U+E007F) spell ASCII invisibly ("ASCII smuggling": an instruction
hidden in a tool output or a pasted text), zero-width characters split words so that a
filter misses them, bidirectional controls reorder what is displayed, variation selectors
(256 of them) can carry a byte each after any visible character, and fillers (the Hangul
fillers U+115F, U+1160, U+3164, U+FFA0) make a blank that is not white space. None of them
carries meaning in a coding transcript or a memory, so :func:`strip_invisible` removes them
before text reaches a model or the store.

Removed: every character of Unicode's ``Default_Ignorable_Code_Point`` property, the set
a renderer shows as nothing (Unicode 15.1, ``DerivedCoreProperties.txt``; the same set
in every version since 6.0, new ones only assigned inside its reserved ranges):

* U+00AD soft hyphen, U+034F combining grapheme joiner, U+061C Arabic letter mark;
* the Hangul fillers U+115F, U+1160, U+3164, U+FFA0;
* U+17B4-U+17B5 (Khmer inherent vowels), U+180B-U+180F (Mongolian free variation
  selectors and vowel separator);
* U+200B-U+200F (zero-width space, non-joiner, joiner, left-to-right and right-to-left
  marks), U+202A-U+202E (bidi embeddings, overrides, pop), U+2060-U+206F (word joiner,
  invisible operators, bidi isolates, deprecated format characters);
* U+FE00-U+FE0F and U+E0100-U+E01EF (variation selectors), U+FEFF (zero-width no-break
  space, byte-order mark), U+FFF0-U+FFF8 (reserved);
* U+1BCA0-U+1BCA3 (shorthand format controls), U+1D173-U+1D17A (musical format controls);
* U+E0000-U+E0FFF (tag characters and the reserved rest of the block).

An emoji sequence joined by U+200D (zero-width joiner) falls apart into its emoji and an
emoji loses its presentation selector U+FE0F; what they say stays. The function is pure
and keeps every other character, line breaks included.
"""

from __future__ import annotations

import re

__all__ = ["INVISIBLE_RE", "strip_invisible"]

#: One invisible character: a ``Default_Ignorable_Code_Point`` (see the module docstring).
INVISIBLE_RE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def strip_invisible(text: str) -> str:
    """``text`` without invisible Unicode characters (``Default_Ignorable_Code_Point``).

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

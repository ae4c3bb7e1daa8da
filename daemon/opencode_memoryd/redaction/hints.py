"""Which rules of a table may match a text, every distinct hint looked for once.

:meth:`~opencode_memoryd.redaction.scan.Rule.may_match` asked rule by rule costs a Python
call per rule and looks for a hint shared by several rules several times; for the short
texts of most turns, that was most of the time :func:`~opencode_memoryd.redaction.engine.redact`
took. A :class:`HintIndex` answers the same question for the whole table at once.

Internal to :mod:`opencode_memoryd.redaction`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from opencode_memoryd.redaction.scan import Rule, ScanText

_H = TypeVar("_H", str, re.Pattern[str])

#: Rule tables (tuples) whose index is kept, by ``id``; few exist in a process.
_CACHE_SIZE = 8


class HintIndex:
    """The hints of a rule table, each with the positions of the rules it belongs to.

    Args:
        rules: the rule table, in its order.
    """

    __slots__ = ("_always", "_case", "_nocase", "_patterns")

    def __init__(self, rules: Sequence[Rule]) -> None:
        self._always = [not rule.hints for rule in rules]
        nocase: dict[str, list[int]] = {}
        case: dict[str, list[int]] = {}
        patterns: dict[re.Pattern[str], list[int]] = {}
        for i, rule in enumerate(rules):
            for hint in rule.hints:
                if isinstance(hint, str):
                    (nocase if rule.hints_nocase else case).setdefault(hint, []).append(i)
                else:
                    patterns.setdefault(hint, []).append(i)
        self._nocase = [_entry(h, ix) for h, ix in nocase.items()]
        self._case = [_entry(h, ix) for h, ix in case.items()]
        self._patterns = [_entry(p, ix) for p, ix in patterns.items()]

    def may_match(self, src: ScanText) -> list[bool]:
        """For each rule, in the table's order, whether it may match ``src``: exactly
        :meth:`~opencode_memoryd.redaction.scan.Rule.may_match` of each rule (string hints
        in ``src.low`` for a case-insensitive rule, else in ``src.text``; patterns in
        ``src.text``; a rule without hints always)."""
        out = self._always.copy()
        low, text = src.low, src.text
        # a hint of one rule is looked for only while that rule is undecided (a long text
        # holds many hints); most hints belong to one rule
        for table, haystack in ((self._nocase, low), (self._case, text)):
            for hint, first, rules in table:
                if rules is None:
                    if not out[first] and hint in haystack:
                        out[first] = True
                elif hint in haystack:
                    for i in rules:
                        out[i] = True
        for pattern, first, rules in self._patterns:
            if (rules is not None or not out[first]) and pattern.search(text):
                for i in rules or (first,):
                    out[i] = True
        return out


def _entry(hint: _H, rules: list[int]) -> tuple[_H, int, tuple[int, ...] | None]:
    """``(hint, its first rule, all its rules or None when it has one)``."""
    return hint, rules[0], (tuple(rules) if len(rules) > 1 else None)


_indexes: dict[int, tuple[tuple[Rule, ...], HintIndex]] = {}


def index_for(rules: Sequence[Rule]) -> HintIndex:
    """The :class:`HintIndex` of ``rules``: built once for a tuple (rules are frozen, so a
    tuple of them never changes), afresh for any other sequence."""
    if not isinstance(rules, tuple):
        return HintIndex(rules)
    got = _indexes.get(id(rules))
    if got is not None and got[0] is rules:
        return got[1]
    index = HintIndex(rules)
    if len(_indexes) >= _CACHE_SIZE:
        _indexes.clear()
    _indexes[id(rules)] = (rules, index)
    return index

"""The hint index answers, for a whole rule table at once, exactly what each rule's own
``may_match`` answers: no rule is skipped that could have found a secret."""

from __future__ import annotations

import re

import pytest

from opencode_memoryd.redaction import scan
from opencode_memoryd.redaction.engine import redact
from opencode_memoryd.redaction.hints import HintIndex, index_for
from opencode_memoryd.redaction.rules import RULES
from opencode_memoryd.redaction.scan import P_ASSIGN, Rule, ScanText
from redaction_corpus import CASES
from redaction_negatives import NEGATIVES

TABLE = tuple(RULES)


def _texts() -> list[str]:
    """The corpora, each hint of the table alone, in upper case and inside a sentence."""
    out = [c.text for c in CASES] + [n.text for n in NEGATIVES]
    for rule in TABLE:
        for hint in rule.hints:
            if isinstance(hint, str):
                out += [hint, hint.upper(), f"see the {hint} here"]
    return [*out, "", "Noted.", "İstanbul token İ", "x" * 5000]


def test_the_index_agrees_with_every_rule_on_every_text() -> None:
    index = index_for(TABLE)
    differ = []
    for text in _texts():
        src = ScanText(text)
        if index.may_match(src) != [rule.may_match(src) for rule in TABLE]:
            differ.append(text[:60])
    assert differ == []


def _finder(_src: ScanText) -> list[tuple[int, int]]:
    return []


def test_shared_hints_patterns_and_rules_without_hints() -> None:
    rules = [
        Rule("a", P_ASSIGN, _finder, hints=("token", "key"), hints_nocase=True),
        Rule("b", P_ASSIGN, _finder, hints=("token",), hints_nocase=True),
        Rule("c", P_ASSIGN, _finder, hints=("Token",)),  # case-sensitive
        Rule("d", P_ASSIGN, _finder, hints=(re.compile(r"-us\d"), "zz")),
        Rule("e", P_ASSIGN, _finder),  # always runs
    ]
    index = HintIndex(rules)
    expected = {
        "a TOKEN here": [True, True, False, False, True],
        "a Token here": [True, True, True, False, True],
        "the key-us1": [True, False, False, True, True],
        "nothing": [False, False, False, False, True],
        "zz": [False, False, False, True, True],
    }
    for text, want in expected.items():
        src = ScanText(text)
        assert index.may_match(src) == want == [r.may_match(src) for r in rules], text


def test_a_tuple_is_indexed_once_a_list_each_time() -> None:
    assert index_for(TABLE) is index_for(TABLE)
    listed = list(TABLE)
    assert index_for(listed) is not index_for(listed)  # a list may change


class _RuleByRule:
    """The check as it was before the index: each rule's own ``may_match``."""

    def __init__(self, rules: list[Rule] | tuple[Rule, ...]) -> None:
        self.rules = rules

    def may_match(self, src: ScanText) -> list[bool]:
        return [rule.may_match(src) for rule in self.rules]


def test_redaction_through_the_index_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [c.text for c in CASES] + [n.text for n in NEGATIVES[:200]]
    now = [redact(t) for t in texts]
    monkeypatch.setattr(scan, "index_for", _RuleByRule)
    before = [redact(t) for t in texts]
    assert [(r.text, r.counts) for r in now] == [(r.text, r.counts) for r in before]
    assert sum(bool(r.counts) for r in now) >= len(CASES) // 2  # the corpus has secrets

"""``bench/_rocchio.py`` (dense pseudo-relevance feedback) and the LoCoMo benches' reading of
evidence ids (``bench/locomo_retrieval.py``)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _rocchio
import locomo_retrieval


def test_rocchio_moves_the_query_towards_the_feedback_centroid() -> None:
    out = _rocchio.rocchio([2.0, 0.0], [[0.0, 5.0], [0.0, 1.0]], 1.0)
    # unit query (1, 0) + 1.0 * centroid of unit feedback (0, 1) = (1, 1), unit length
    assert out == pytest.approx([1 / math.sqrt(2), 1 / math.sqrt(2)])
    out = _rocchio.rocchio([1.0, 0.0], [[0.0, 1.0]], 0.5)
    assert out == pytest.approx([1 / math.sqrt(1.25), 0.5 / math.sqrt(1.25)])


def test_rocchio_without_feedback_or_weight_is_the_unit_query() -> None:
    assert _rocchio.rocchio([3.0, 4.0], [], 0.5) == pytest.approx([0.6, 0.8])
    assert _rocchio.rocchio([3.0, 4.0], [[1.0, 0.0]], 0.0) == pytest.approx([0.6, 0.8])
    assert _rocchio.rocchio([3.0, 4.0], [[0.0, 0.0]], 1.0) == pytest.approx([0.6, 0.8])


def test_rocchio_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="all zeros"):
        _rocchio.rocchio([0.0, 0.0], [[1.0, 0.0]], 0.5)
    with pytest.raises(ValueError, match="beta"):
        _rocchio.rocchio([1.0, 0.0], [], -0.1)
    with pytest.raises(ValueError, match="length 3"):
        _rocchio.rocchio([1.0, 0.0], [[1.0, 0.0, 0.0]], 0.5)


@pytest.mark.parametrize(("raw", "ids"), [
    (["D8:6; D9:17"], {"D8:6", "D9:17"}),
    (["D9:1 D4:4 D4:6"], {"D9:1", "D4:4", "D4:6"}),
    (["D30:05"], {"D30:5"}),
    (["D:11:26", "D1:14"], {"D11:26", "D1:14"}),
    (["D1:18", "D", "D1:20"], {"D1:18", "D1:20"}),
    (["D"], set()),
])
def test_evidence_ids_read_locomos_typos(raw: list[str], ids: set[str]) -> None:
    assert locomo_retrieval.evidence_ids(raw) == frozenset(ids)
    assert locomo_retrieval.evidence_ids(raw, repair=False) == frozenset(raw)


def test_load_keeps_questions_whose_evidence_names_a_turn(tmp_path: Path) -> None:
    turn = {"speaker": "Ann", "dia_id": "D1:2", "text": "I moved to Oslo."}
    data = [{"sample_id": "c0", "conversation": {"session_1": [turn]}, "qa": [
        {"question": "Where did Ann move?", "evidence": ["D1:02"], "category": 1},
        {"question": "Nothing named", "evidence": ["D"], "category": 1},
        {"question": "Adversarial", "evidence": ["D1:2"], "category": 5},
    ]}]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    _convs, turns, questions = locomo_retrieval.load(path)
    assert [t.text for t in turns] == ["Ann: I moved to Oslo."]
    assert [(q.text, q.evidence) for q in questions] == [("Where did Ann move?",
                                                          frozenset({"D1:2"}))]
    _convs, _turns, raw = locomo_retrieval.load(path, repair=False)
    assert [(q.text, q.evidence) for q in raw] == [("Where did Ann move?", frozenset({"D1:02"})),
                                                  ("Nothing named", frozenset({"D"}))]

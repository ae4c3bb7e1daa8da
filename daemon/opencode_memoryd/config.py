"""The configuration of opencode-memoryd: schema, loading, path resolution, example file.

The config is one TOML file, by default ``$XDG_CONFIG_HOME/opencode-memoryd/config.toml``.
Which file is read (first match wins):

1. the ``path`` argument of :func:`load_config` (the CLI's ``--config PATH``);
2. the file named by ``$OPENCODE_MEMORYD_CONFIG``;
3. the XDG default, see :func:`config_path`.

A file named by 1 or 2 must exist; the XDG default may be absent (all defaults apply).
Values layer as: defaults < file < CLI flags (the CLI applies flags with
:func:`apply_overrides`).

Every key is optional. Sections and keys are checked strictly: an unknown key, a value of
the wrong TOML type or out of range is an error, and every problem in the file is reported
at once in a :class:`~opencode_memoryd.errors.ConfigError`, one line per problem, each
``at `section.key`: message``.

Adding a section: define a ``_Section`` subclass whose fields all have defaults and a
``description``, then add one field to :class:`Config` with
``Field(default_factory=TheSection, description=...)``. The example file, the docs comments
and the validation follow from the schema; regenerate ``config.example.toml`` with
``python -m opencode_memoryd.config config.example.toml``.
"""

from __future__ import annotations

import difflib
import errno
import json
import os
import re
import sys
import textwrap
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import tomli_w
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from opencode_memoryd.errors import ConfigError

__all__ = [
    "APP_NAME",
    "CONFIG_ENV_VAR",
    "Config",
    "DedupConfig",
    "EmbeddingConfig",
    "ExtractionConfig",
    "LlmConfig",
    "LogConfig",
    "OpencodeConfig",
    "QdrantConfig",
    "StateConfig",
    "apply_overrides",
    "config_path",
    "configured_db_paths",
    "default_config_path",
    "init_config",
    "load_config",
    "main",
    "opencode_data_dir",
    "parse_config",
    "render_example",
    "state_dir",
    "store_dir",
    "write_example",
    "xdg_config_home",
    "xdg_data_home",
    "xdg_state_home",
]

#: Directory name used under every XDG base directory.
APP_NAME = "opencode-memoryd"
#: Environment variable naming the config file (overrides the XDG default).
CONFIG_ENV_VAR = "OPENCODE_MEMORYD_CONFIG"

_CROSS_ERROR = "config_cross_field"


# --------------------------------------------------------------------------------------
# Reusable field types
# --------------------------------------------------------------------------------------


def _check_env_name(value: str) -> str:
    if value and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise PydanticCustomError(
            "config_value",
            "must be the name of an environment variable (letters, digits, _), "
            "not the secret itself",
        )
    return value


def _check_path(value: str) -> str:
    if value and not (os.path.isabs(value) or value.startswith("~")):
        raise PydanticCustomError("config_value", "must be an absolute path or start with ~")
    return value


def _check_url(value: str) -> str:
    if value:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise PydanticCustomError("config_value", "must be an http:// or https:// URL")
    return value


#: Name of an environment variable, or empty.
EnvVarName = Annotated[str, AfterValidator(_check_env_name)]
#: Absolute or ``~``-relative filesystem path, or empty.
PathStr = Annotated[str, AfterValidator(_check_path)]
#: ``http(s)://`` URL, or empty.
UrlStr = Annotated[str, AfterValidator(_check_url)]


class _Section(BaseModel):
    """Base of every section: frozen, strict TOML types, unknown keys rejected.

    Subclasses may override :meth:`_cross_field_problems` to report problems that involve
    several keys; each problem names the key it is reported at.
    """

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        strict=True,
        validate_default=True,
        allow_inf_nan=False,
    )

    def _cross_field_problems(self) -> list[tuple[str, str]]:
        """Return ``(dotted key relative to this model, message)`` pairs; none by default."""
        return []

    @model_validator(mode="after")
    def _run_cross_field_checks(self) -> _Section:
        problems = tuple(self._cross_field_problems())
        if problems:
            raise PydanticCustomError(
                _CROSS_ERROR,
                "{summary}",
                {"summary": "; ".join(f"{k}: {m}" for k, m in problems), "problems": problems},
            )
        return self


# --------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------


class OpencodeConfig(_Section):
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
        description=(
            "An assistant message still in flight after this many seconds counts as "
            "finished (a crashed OpenCode leaves one open forever). Must be > 0."
        ),
    )
    settle_seconds: float = Field(
        default=2.0,
        ge=0,
        description=(
            "A finished turn is read only once it is at least this many seconds old, so "
            "OpenCode's trailing writes land first. Must be >= 0."
        ),
    )
    busy_timeout_ms: int = Field(
        default=3000,
        ge=0,
        description=(
            "How long to wait, in milliseconds, when OpenCode holds the database lock "
            "(SQLite busy timeout). Must be >= 0."
        ),
    )


class ExtractionConfig(_Section):
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
        description=(
            "Transcript budget per LLM call, in tokens; longer sessions are split into "
            "chunks. Must be >= 500."
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
        description="Longest accepted memory, in characters. Must be >= 20.",
    )
    tool_output_chars: int = Field(
        default=160,
        ge=0,
        description=(
            "Tool outputs are cut to this many characters in the transcript shown to the "
            "extractor; 0 = leave them out. Must be >= 0."
        ),
    )


class LlmConfig(_Section):
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
    timeout_seconds: float = Field(
        default=60.0, gt=0, description="Timeout of one LLM call, in seconds. Must be > 0."
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        description=(
            "Retries of a call that failed for a transient reason (rate limit, server "
            "error, timeout). Must be >= 0."
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
            'How structured output is requested: "json_schema" (a strict JSON schema), '
            '"json_object" (any JSON object) or "none" (prompt only, for servers that '
            "support neither)."
        ),
    )


class EmbeddingConfig(_Section):
    """``[embedding]``: the model that turns memories into vectors for semantic search."""

    provider: Literal["none", "openai", "fastembed"] = Field(
        default="none",
        description=(
            'Embedding provider: "openai" (any OpenAI-compatible embeddings endpoint), '
            '"fastembed" (a local model; needs the fastembed extra) or "none" (no vectors: '
            "keyword search only)."
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
        description=(
            "Vector size to request from models that can shorten their output; "
            "0 = take what the endpoint returns."
        ),
    )
    timeout_seconds: float = Field(
        default=30.0, gt=0, description="Timeout of one embedding call, in seconds. Must be > 0."
    )

    def _cross_field_problems(self) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        if self.provider == "openai":
            if not self.base_url:
                problems.append(("base_url", 'required when provider is "openai"'))
            if not self.model:
                problems.append(("model", 'required when provider is "openai"'))
        return problems


class QdrantConfig(_Section):
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
        default=10.0, gt=0, description="Timeout of one Qdrant request, in seconds. Must be > 0."
    )

    def _cross_field_problems(self) -> list[tuple[str, str]]:
        if self.url and self.path:
            return [("path", "only used by the embedded store; leave it empty when url is set")]
        return []


class DedupConfig(_Section):
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


class StateConfig(_Section):
    """``[state]``: the daemon's own bookkeeping."""

    dir: PathStr = Field(
        default="",
        description=(
            "Directory of the daemon's state (how far each database has been read). "
            "Empty = $XDG_STATE_HOME/opencode-memoryd."
        ),
    )


class LogConfig(_Section):
    """``[log]``: logging."""

    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info",
        description='Lowest level logged: "debug", "info", "warning" or "error".',
    )
    file_max_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=0,
        description="Size, in bytes, at which the log file is rotated; 0 = never rotate.",
    )
    file_backups: int = Field(
        default=5, ge=0, description="Number of rotated log files kept. Must be >= 0."
    )


class DaemonConfig(_Section):
    """``[daemon]``: when ``opencode-memoryd run`` extracts, and how it paces itself."""

    quiet_period_seconds: float = Field(
        default=60.0,
        ge=0,
        description=(
            "A session is extracted once its last turn is finished and nothing in it "
            "changed for this long, in seconds (debounce)."
        ),
    )
    max_wait_seconds: float = Field(
        default=900.0,
        gt=0,
        description=(
            "A session that never goes quiet is still extracted this long, in seconds, "
            "after its oldest unread finished turn."
        ),
    )
    sweep_interval_seconds: float = Field(
        default=300.0,
        gt=0,
        description=(
            "Safety sweep: every this many seconds all databases are checked for changes "
            "that file events missed."
        ),
    )
    poll_interval_seconds: float = Field(
        default=2.0,
        gt=0,
        description=(
            "How often, in seconds, databases are polled when file events are unavailable "
            "(network file systems, inotify limits)."
        ),
    )
    daily_token_budget: int = Field(
        default=0,
        ge=0,
        description=(
            "LLM tokens (prompt + completion) the daemon may spend per UTC day; work past "
            "it waits for the next day. 0 = no limit."
        ),
    )
    circuit_failure_threshold: int = Field(
        default=5,
        ge=1,
        description=(
            "Consecutive retryable LLM failures (429, 5xx, timeouts) after which all LLM "
            "work pauses for circuit_cooldown_seconds."
        ),
    )
    circuit_cooldown_seconds: float = Field(
        default=300.0,
        gt=0,
        description="How long, in seconds, LLM work pauses once the circuit breaker opens.",
    )
    auth_pause_seconds: float = Field(
        default=900.0,
        gt=0,
        description=(
            "After a 401/403/404 from the LLM endpoint, LLM work pauses and is re-probed "
            "every this many seconds."
        ),
    )


class DreamConfig(_Section):
    """``[dream]``: periodic consolidation of the store (merges duplicates, retires stale facts)."""

    enabled: bool = Field(default=True, description="Let the daemon dream on its schedule.")
    check_interval_minutes: float = Field(
        default=30.0, gt=0,
        description="How often, in minutes, the daemon checks whether a scope should dream.",
    )
    min_hours_between_dreams: float = Field(
        default=24.0, ge=0,
        description="A scope dreams at most once per this many hours.",
    )
    min_new_memories: int = Field(
        default=10, ge=0,
        description="A scope dreams only when at least this many memories were added or "
                    "changed since its last dream.",
    )
    max_retire_share: float = Field(
        default=0.3, gt=0, le=1,
        description="No dream retires more than this share of a scope's memories (0 < x <= 1).",
    )


class Config(_Section):
    """The whole configuration: one attribute per TOML section, all with defaults.

    ``Config()`` is the all-defaults configuration. Instances are frozen and hashable;
    use :func:`apply_overrides` to derive a changed copy.
    """

    opencode: OpencodeConfig = Field(
        default_factory=OpencodeConfig,
        description="Where OpenCode's SQLite databases are, and how to read them.",
    )
    extraction: ExtractionConfig = Field(
        default_factory=ExtractionConfig,
        description="How memories are extracted from session transcripts.",
    )
    llm: LlmConfig = Field(
        default_factory=LlmConfig,
        description="The chat model that extracts memories (any OpenAI-compatible API).",
    )
    embedding: EmbeddingConfig = Field(
        default_factory=EmbeddingConfig,
        description="The model that turns memories into vectors for semantic search.",
    )
    qdrant: QdrantConfig = Field(
        default_factory=QdrantConfig,
        description="Where memories are stored: a Qdrant server, or an embedded store on disk.",
    )
    dedup: DedupConfig = Field(
        default_factory=DedupConfig,
        description="When a new memory counts as a duplicate of a stored one.",
    )
    daemon: DaemonConfig = Field(
        default_factory=DaemonConfig,
        description="The long-running daemon (`opencode-memoryd run`): debounce and pacing.",
    )
    dream: DreamConfig = Field(
        default_factory=DreamConfig,
        description="Dreaming: scheduled consolidation of the memory store.",
    )
    state: StateConfig = Field(default_factory=StateConfig, description="The daemon's own state.")
    log: LogConfig = Field(default_factory=LogConfig, description="Logging.")

    def _cross_field_problems(self) -> list[tuple[str, str]]:
        if self.extraction.mode == "llm" and not self.llm.base_url:
            return [("llm.base_url", 'required when extraction.mode is "llm"')]
        return []

    @property
    def extraction_mode(self) -> Literal["llm", "rules"]:
        """The extractor to use: ``extraction.mode`` with ``auto`` resolved."""
        mode = self.extraction.mode
        if mode == "auto":
            return "llm" if self.llm.base_url else "rules"
        return mode


# --------------------------------------------------------------------------------------
# Validation errors -> ConfigError lines
# --------------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key_path(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = part if _BARE_KEY.fullmatch(part) else json.dumps(part)
            out += f".{key}" if out else key
    return out


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """Return the section model found at ``loc`` inside :class:`Config`, if any."""
    model: type[BaseModel] = Config
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        ann = field.annotation if field else None
        if not (isinstance(ann, type) and issubclass(ann, BaseModel)):
            return None
        model = ann
    return model


def _problem_lines(exc: ValidationError, prefix: tuple[str | int, ...] = ()) -> list[str]:
    lines: list[str] = []
    for err in exc.errors(include_url=False):
        loc = prefix + tuple(err["loc"])
        kind = err["type"]
        if kind == _CROSS_ERROR:
            for key, message in err["ctx"]["problems"]:
                lines.append(f"at `{_key_path(loc + tuple(key.split('.')))}`: {message}")
            continue
        if kind == "extra_forbidden":
            parent = _model_at(loc[:-1])
            what = "unknown section" if parent is Config else "unknown key"
            msg = what
            if parent is not None and isinstance(loc[-1], str):
                close = difflib.get_close_matches(loc[-1], list(parent.model_fields), n=1)
                if close:
                    msg = f"{what}; did you mean `{close[0]}`?"
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            msg = "expected a table"
        else:
            msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"at `{_key_path(loc) or '(top level)'}`: {msg}")
    return lines


# --------------------------------------------------------------------------------------
# Path resolution (pure: everything comes from the env mapping)
# --------------------------------------------------------------------------------------


def _environ(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME", "")
    return Path(home) if home else Path(os.path.expanduser("~"))


def _expand(value: str, env: Mapping[str, str]) -> Path:
    """Expand a leading ``~`` (using ``HOME`` from ``env``) and return the path."""
    if value == "~" or value.startswith("~/"):
        return _home(env) / value[2:]
    if value.startswith("~"):
        return Path(os.path.expanduser(value))
    return Path(value)


def _xdg(env: Mapping[str, str] | None, var: str, fallback: str) -> Path:
    env = _environ(env)
    value = env.get(var, "")
    # The XDG spec: relative values are invalid and must be ignored, as are empty ones.
    if value and os.path.isabs(value):
        return Path(value)
    return _home(env) / fallback


def xdg_config_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME``, else ``$HOME/.config`` (empty or relative values are unset)."""
    return _xdg(env, "XDG_CONFIG_HOME", ".config")


def xdg_data_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME``, else ``$HOME/.local/share`` (empty or relative values are unset)."""
    return _xdg(env, "XDG_DATA_HOME", ".local/share")


def xdg_state_home(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME``, else ``$HOME/.local/state`` (empty or relative values are unset)."""
    return _xdg(env, "XDG_STATE_HOME", ".local/state")


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """The XDG config file: ``xdg_config_home(env)/opencode-memoryd/config.toml``."""
    return xdg_config_home(env) / APP_NAME / "config.toml"


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file read when no explicit path is given.

    ``$OPENCODE_MEMORYD_CONFIG`` (``~`` expanded) when set and non-empty, else
    :func:`default_config_path`. ``env`` defaults to ``os.environ``.
    """
    env = _environ(env)
    named = env.get(CONFIG_ENV_VAR, "")
    return _expand(named, env) if named else default_config_path(env)


def state_dir(cfg: Config, env: Mapping[str, str] | None = None) -> Path:
    """The daemon's state directory: ``state.dir``, else ``$XDG_STATE_HOME/opencode-memoryd``."""
    env = _environ(env)
    return _expand(cfg.state.dir, env) if cfg.state.dir else xdg_state_home(env) / APP_NAME


def store_dir(cfg: Config, env: Mapping[str, str] | None = None) -> Path:
    """The embedded Qdrant store directory: ``qdrant.path``, else
    ``$XDG_DATA_HOME/opencode-memoryd/qdrant``. Meaningful only when ``qdrant.url`` is empty.
    """
    env = _environ(env)
    if cfg.qdrant.path:
        return _expand(cfg.qdrant.path, env)
    return xdg_data_home(env) / APP_NAME / "qdrant"


def configured_db_paths(cfg: Config, env: Mapping[str, str] | None = None) -> list[Path]:
    """``opencode.db_paths`` as paths, ``~`` expanded; empty when databases are to be found
    in :func:`opencode_data_dir` instead. No filesystem access.
    """
    env = _environ(env)
    return [_expand(p, env) for p in cfg.opencode.db_paths]


def opencode_data_dir(cfg: Config, env: Mapping[str, str] | None = None) -> Path:
    """OpenCode's data directory: ``opencode.data_dir``, else ``$XDG_DATA_HOME/opencode``."""
    env = _environ(env)
    if cfg.opencode.data_dir:
        return _expand(cfg.opencode.data_dir, env)
    return xdg_data_home(env) / "opencode"


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------

_TOML_POSITION = re.compile(
    r"^(?P<msg>.*?)\s*\(at (?P<where>line \d+, column \d+|end of document)\)$"
)


def parse_config(data: Mapping[str, Any], source: str | None = None) -> Config:
    """Validate a parsed TOML document (nested dicts) into a :class:`Config`.

    Args:
        data: the document, as ``tomllib`` returns it.
        source: the file it came from, named in the error.

    Raises:
        ConfigError: with one ``at `key.path`: message`` line per problem, all at once.
    """
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, _problem_lines(exc)) from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(str(path), ["file not found"]) from None
    except IsADirectoryError:
        raise ConfigError(str(path), ["is a directory, not a file"]) from None
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read: {exc.strerror or exc}"]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), [f"not valid UTF-8 (byte {exc.start})"]) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        m = _TOML_POSITION.match(message)
        if m:
            message = f"at {m['where']}: TOML syntax error: {m['msg']}"
        else:
            message = f"TOML syntax error: {message}"
        raise ConfigError(str(path), [message]) from None


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Find, read and validate the config file.

    Args:
        path: explicit file (the CLI's ``--config``); must exist. ``~`` is expanded.
        env: environment for ``$OPENCODE_MEMORYD_CONFIG`` and the XDG/``HOME`` variables;
            defaults to ``os.environ``.

    Returns:
        The validated, frozen :class:`Config`. All defaults when no path is given, the env
        variable is unset and the XDG default file does not exist.

    Raises:
        ConfigError: the file is missing (when named explicitly or by the env variable),
            unreadable, not UTF-8, not valid TOML (line and column given) or invalid
            (every problem listed with its key path).
    """
    env = _environ(env)
    if path is not None:
        file = _expand(str(path), env)
    elif env.get(CONFIG_ENV_VAR, ""):
        file = config_path(env)
        if not file.exists():
            raise ConfigError(str(file), [f"file not found (named by ${CONFIG_ENV_VAR})"])
    else:
        file = default_config_path(env)
        if not file.exists() and not file.is_symlink():
            return Config()
    return parse_config(_read_toml(file), str(file))


def apply_overrides(cfg: Config, overrides: Mapping[str, Any]) -> Config:
    """Return a copy of ``cfg`` with dotted keys replaced, validated like the file.

    Args:
        cfg: the loaded configuration.
        overrides: ``{"section.key": value}``, values typed as in TOML (``str``, ``int``,
            ``float``, ``bool``, ``list[str]``), e.g. ``{"log.level": "debug"}``.

    Raises:
        ConfigError: (``path`` is ``None``) an unknown key or an invalid value, one line per
            problem with its key path.
    """
    data: dict[str, Any] = cfg.model_dump()
    problems: list[str] = []
    for dotted, value in overrides.items():
        *sections, key = dotted.split(".")
        table: Any = data
        for name in sections:
            table = table.get(name) if isinstance(table, dict) else None
        if not isinstance(table, dict) or key not in table:
            problems.append(f"at `{dotted}`: unknown key")
            continue
        table[key] = value
    if problems:
        raise ConfigError(None, problems)
    return parse_config(data)


# --------------------------------------------------------------------------------------
# Example file and `init`
# --------------------------------------------------------------------------------------

_WRAP = 88  # "# " + text stays within 90 columns

_HEADER = f"""\
opencode-memoryd configuration.

Read from --config PATH, else the file named by ${CONFIG_ENV_VAR}, else
$XDG_CONFIG_HOME/{APP_NAME}/config.toml (~/.config/{APP_NAME}/config.toml).
Every key is optional and every value below is the default: delete what you do not change.
Units are in the key names (_seconds, _ms, _bytes, _chars, _tokens).
"""


def _comment(text: str) -> list[str]:
    glue = "\x00"  # keeps "x = y" on one line: textwrap only breaks at whitespace
    lines: list[str] = []
    for paragraph in text.split("\n"):
        paragraph = paragraph.replace(" = ", f"{glue}={glue}")
        wrapped = textwrap.wrap(paragraph, _WRAP, break_on_hyphens=False, break_long_words=False)
        lines.extend(f"# {w}".replace(glue, " ") if w else "#" for w in (wrapped or [""]))
    return lines


def render_example() -> str:
    """Return the commented example config: every section and key, at its default.

    Each key is preceded by its description as ``#`` comment lines (wrapped to 90
    columns) and written with its default value. The text parses back to exactly
    ``Config().model_dump(mode="json")``.
    """
    defaults = Config()
    out = _comment(_HEADER.rstrip("\n"))
    for section, sfield in Config.model_fields.items():
        model = sfield.annotation
        assert isinstance(model, type) and issubclass(model, _Section), section
        out.append("")
        out.append("")
        out.extend(_comment(sfield.description or ""))
        out.append(tomli_w.dumps({section: {}}).strip())
        values = getattr(defaults, section).model_dump(mode="json")
        for i, (key, kfield) in enumerate(model.model_fields.items()):
            if i:
                out.append("")
            out.extend(_comment(kfield.description or ""))
            out.append(tomli_w.dumps({key: values[key]}).rstrip("\n"))
    return "\n".join(out) + "\n"


def write_example(path: Path) -> None:
    """Write :func:`render_example` to ``path`` (overwriting it), e.g. ``config.example.toml``."""
    Path(path).write_text(render_example(), encoding="utf-8")


def init_config(path: Path) -> Path:
    """Create a new config file holding :func:`render_example`, mode 0600.

    Parent directories are created as needed. An existing file is never touched.

    Returns:
        ``path``.

    Raises:
        FileExistsError: ``path`` already exists (file, directory or dangling symlink).
        OSError: the directory or file cannot be created or written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise FileExistsError(
            errno.EEXIST, "config file already exists; not overwriting it", str(path)
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o600)  # the umask may have removed bits, never added
            fh.write(render_example())
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m opencode_memoryd.config [--check] [PATH]``.

    Without PATH, print the example config. With PATH, write it there; with ``--check``,
    exit 1 instead if PATH differs from the example.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if len(args) > 1 or any(a.startswith("-") for a in args) or (check and not args):
        print("usage: python -m opencode_memoryd.config [--check] [PATH]", file=sys.stderr)
        return 2
    if not args:
        sys.stdout.write(render_example())
        return 0
    target = Path(args[0])
    if check:
        try:
            current = target.read_text(encoding="utf-8")
        except OSError:
            current = None
        if current != render_example():
            print(
                f"{target} is out of date; regenerate it with "
                f"python -m opencode_memoryd.config {target}",
                file=sys.stderr,
            )
            return 1
        return 0
    write_example(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

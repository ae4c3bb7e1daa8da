"""Reading the config: find the file, parse the TOML, validate it, report every problem.

Which file is read (first match wins):

1. the ``path`` argument of :func:`load_config` (the CLI's ``--config PATH``);
2. the file named by ``$OPENCODE_MEMORYD_CONFIG``;
3. the XDG default, see :func:`~opencode_memoryd.config.paths.config_path`.

A file named by 1 or 2 must exist; the XDG default may be absent (all defaults apply).
Values layer as: defaults < file < CLI flags (the CLI applies flags with
:func:`apply_overrides`).

Every problem in the file is reported at once in a
:class:`~opencode_memoryd.errors.ConfigError`, one line per problem, each
``at `section.key`: message``.
"""

from __future__ import annotations

import difflib
import errno
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from opencode_memoryd.config.fields import CROSS_FIELD_ERROR
from opencode_memoryd.config.paths import (
    CONFIG_ENV_VAR,
    config_path,
    default_config_path,
    effective_env,
    expand_home,
)
from opencode_memoryd.config.schema import Config
from opencode_memoryd.errors import ConfigError

__all__ = ["apply_overrides", "init_config", "load_config", "parse_config"]

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
        if kind == CROSS_FIELD_ERROR:
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
    env = effective_env(env)
    if path is not None:
        file = expand_home(str(path), env)
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
# `config init`
# --------------------------------------------------------------------------------------


def init_config(path: Path) -> Path:
    """Create a new config file holding
    :func:`~opencode_memoryd.config.example.render_example`, mode 0600.

    Parent directories are created as needed. An existing file is never touched.

    Returns:
        ``path``.

    Raises:
        FileExistsError: ``path`` already exists (file, directory or dangling symlink).
        OSError: the directory or file cannot be created or written.
    """
    from opencode_memoryd.config.example import render_example  # only `config init` needs it

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


def config_digest(path: Path | None) -> str | None:
    """SHA-256 (hex) of the config file's bytes, or ``None`` (no path, no file, unreadable):
    what a running daemon compares to tell that its config file changed since it read it."""
    if path is None:
        return None
    import hashlib

    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None

"""Building blocks of the config schema: reusable field types and the section base class.

Every TOML section is a :class:`Section` subclass. Its values are checked strictly (TOML
types, no coercion, unknown keys rejected); problems involving several keys are raised as
one :data:`CROSS_FIELD_ERROR` error that :mod:`opencode_memoryd.config.loader` unpacks into
one line per key.
"""

from __future__ import annotations

import os
import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

__all__ = ["CROSS_FIELD_ERROR", "DAY", "HOUR", "EnvVarName", "PathStr", "Section", "UrlStr"]

#: Seconds in an hour and in a day, for the upper bounds of durations.
HOUR = 3600
DAY = 24 * HOUR

#: The pydantic error type of a cross-field problem; its context holds
#: ``problems``: ``((dotted key relative to the section, message), ...)``.
CROSS_FIELD_ERROR = "config_cross_field"


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


class Section(BaseModel):
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
    def _run_cross_field_checks(self) -> Section:
        problems = tuple(self._cross_field_problems())
        if problems:
            raise PydanticCustomError(
                CROSS_FIELD_ERROR,
                "{summary}",
                {"summary": "; ".join(f"{k}: {m}" for k, m in problems), "problems": problems},
            )
        return self


"""``[web]``: the local web page and REST API the daemon serves (off by default)."""

from __future__ import annotations

import ipaddress

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from opencode_memoryd.config.fields import Section

#: The host names the page may be reached by (the ``Host`` header is checked against them).
LOOPBACK_NAMES: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")


class WebConfig(Section):
    """``[web]``: whether the daemon serves the web page, and on which loopback port."""

    enabled: bool = Field(
        default=False,
        description=(
            "Serve the web page and its REST API from the daemon (`opencode-memoryd web` "
            "opens it). Only this machine can reach it, with the token in the state dir."
        ),
    )
    host: str = Field(
        default="127.0.0.1",
        description=(
            "The loopback address to listen on: 127.0.0.1 or ::1 (any other address is "
            "refused: the page is for this machine only)."
        ),
    )
    port: int = Field(
        default=4747,
        ge=0,
        le=65535,
        description="The TCP port to listen on; 0 picks a free one at each start. 0 to 65535.",
    )
    session_idle_seconds: int = Field(
        default=1800,
        ge=60,
        le=86400,
        description=(
            "A page session (a browser tab logged in by `opencode-memoryd web`) ends after "
            "this long without a request. 60 to 86400."
        ),
    )
    session_max_seconds: int = Field(
        default=43200,
        ge=300,
        le=604800,
        description="A page session ends this long after its login, however active. 300 to "
                    "604800.",
    )
    session_rotate_seconds: int = Field(
        default=600,
        ge=30,
        le=86400,
        description=(
            "A page session's token is replaced by a new one once it is this old (the old "
            "one stays good 30 s more). 30 to 86400."
        ),
    )

    @field_validator("host")
    @classmethod
    def _loopback_only(cls, value: str) -> str:
        try:
            loopback = ipaddress.ip_address(value).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise PydanticCustomError(
                "config_value",
                "must be a loopback address (127.0.0.1 or ::1): the web page is never "
                "served to other machines")
        return value

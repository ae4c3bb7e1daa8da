"""``[daemon]``: the pacing of ``opencode-memoryd run``.

Every number has a lower and an upper bound, so an absurd value is a config error
naming its key (exit 78) instead of a crash later.
"""

from __future__ import annotations

from pydantic import Field

from opencode_memoryd.config.fields import DAY, HOUR, Section

__all__ = ["DaemonConfig"]


class DaemonConfig(Section):
    """``[daemon]``: when ``opencode-memoryd run`` extracts, and how it paces itself."""

    quiet_period_seconds: float = Field(
        default=60.0,
        ge=0,
        le=DAY,
        description=(
            "A session is extracted once its last turn is finished and nothing in it "
            "changed for this long, in seconds (debounce). 0 to 86400."
        ),
    )
    max_wait_seconds: float = Field(
        default=900.0,
        gt=0,
        le=7 * DAY,
        description=(
            "A session that never goes quiet is still extracted this long, in seconds, "
            "after its oldest unread finished turn (0 < x <= 604800)."
        ),
    )
    sweep_interval_seconds: float = Field(
        default=300.0,
        gt=0,
        le=DAY,
        description=(
            "Safety sweep: every this many seconds all databases are checked for changes "
            "that file events missed (0 < x <= 86400)."
        ),
    )
    poll_interval_seconds: float = Field(
        default=2.0,
        gt=0,
        le=HOUR,
        description=(
            "How often, in seconds, databases are polled when file events are unavailable "
            "(network file systems, inotify limits); 0 < x <= 3600."
        ),
    )
    daily_token_budget: int = Field(
        default=0,
        ge=0,
        le=10**12,
        description=(
            "LLM tokens (prompt + completion) the daemon may spend per UTC day; work past "
            "it waits for the next day. 0 = no limit."
        ),
    )
    circuit_failure_threshold: int = Field(
        default=5,
        ge=1,
        le=1000,
        description=(
            "Consecutive retryable LLM failures (429, 5xx, timeouts) after which all LLM "
            "work pauses for circuit_cooldown_seconds (1-1000)."
        ),
    )
    circuit_cooldown_seconds: float = Field(
        default=300.0,
        gt=0,
        le=DAY,
        description="How long, in seconds, LLM work pauses once the circuit breaker opens "
                    "(0 < x <= 86400).",
    )
    auth_pause_seconds: float = Field(
        default=900.0,
        gt=0,
        le=DAY,
        description=(
            "After a 401/403/404 from the LLM endpoint, LLM work pauses and is re-probed "
            "every this many seconds (0 < x <= 86400)."
        ),
    )

"""The commented example config, rendered from the schema.

The repository's ``config.example.toml`` is this output; ``python -m
opencode_memoryd.cli.examples config [--check] [PATH]`` writes or checks it.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import tomli_w

from opencode_memoryd.config.fields import Section
from opencode_memoryd.config.paths import APP_NAME, CONFIG_ENV_VAR
from opencode_memoryd.config.schema import Config

__all__ = ["TUNING_KEYS", "render_example", "write_example"]

#: Keys for tuning the machinery, rarely changed: the example file names them in one comment
#: per section instead of writing each out (the configuration reference lists them all, and
#: each still works in a config file).
TUNING_KEYS = frozenset({
    "opencode.abandoned_turn_seconds", "opencode.settle_seconds",
    "opencode.unconfirmed_turn_seconds", "opencode.busy_timeout_ms",
    "extraction.max_chunk_tokens", "extraction.max_memories_per_chunk",
    "extraction.max_memory_chars", "extraction.tool_output_chars",
    "extraction.max_identical_failures",
    "llm.max_retries", "llm.temperature", "llm.json_mode",
    "embedding.batch_size", "embedding.timeout_seconds", "qdrant.timeout_seconds",
    "dedup.near_duplicate_similarity",
    "daemon.sweep_interval_seconds", "daemon.poll_interval_seconds",
    "daemon.circuit_failure_threshold", "daemon.circuit_cooldown_seconds",
    "daemon.auth_pause_seconds",
    "dream.max_retire_share", "summaries.max_chars", "summaries.brief_max_chars",
    "context.capture_first_seconds",
    "web.session_idle_seconds", "web.session_max_seconds", "web.session_rotate_seconds",
    "log.file_max_bytes", "log.file_backups",
})

_WRAP = 88  # "# " + text stays within 90 columns

_HEADER = f"""\
opencode-memoryd configuration.

Read from --config PATH, else the file named by ${CONFIG_ENV_VAR}, else
$XDG_CONFIG_HOME/{APP_NAME}/config.toml (~/.config/{APP_NAME}/config.toml).
Every key is optional and every value below is the default: delete what you do not change.
Units are in the key names (_seconds, _ms, _bytes, _chars, _tokens). Keys for tuning, rarely
changed, are named at the end of their section; the configuration reference describes them.
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
    columns) and written with its default value; the keys of :data:`TUNING_KEYS` are only
    named, in one comment line at the end of their section. The text parses back to
    ``Config()``.
    """
    defaults = Config()
    out = _comment(_HEADER.rstrip("\n"))
    for section, sfield in Config.model_fields.items():
        model = sfield.annotation
        assert isinstance(model, type) and issubclass(model, Section), section
        out.append("")
        out.append("")
        out.extend(_comment(sfield.description or ""))
        out.append(tomli_w.dumps({section: {}}).strip())
        values = getattr(defaults, section).model_dump(mode="json")
        tuning = [k for k in model.model_fields if f"{section}.{k}" in TUNING_KEYS]
        shown = [k for k in model.model_fields if k not in tuning]
        for i, key in enumerate(shown):
            if i:
                out.append("")
            out.extend(_comment(model.model_fields[key].description or ""))
            out.append(tomli_w.dumps({key: values[key]}).rstrip("\n"))
        if tuning:
            out.append("")
            out.extend(_comment("Tuning: " + ", ".join(tuning) + "."))
    return "\n".join(out) + "\n"


def write_example(path: Path) -> None:
    """Write :func:`render_example` to ``path`` (overwriting it), e.g. ``config.example.toml``."""
    Path(path).write_text(render_example(), encoding="utf-8")

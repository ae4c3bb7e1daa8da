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

__all__ = ["render_example", "write_example"]

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
        assert isinstance(model, type) and issubclass(model, Section), section
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

"""The reference pages of the documentation site, generated from the code that they describe.

Each function returns one Markdown page:

- :func:`cli_reference`: every command and subcommand's ``--help``, from the parser;
- :func:`config_reference`: every config section and key with its default and description,
  from the schema (:class:`~opencode_memoryd.config.schema.Config`);
- :func:`exit_codes_reference`: the exit codes, from the text ``--help`` prints
  (:data:`~opencode_memoryd.cli.exits.EXIT_CODES_HELP`);
- :func:`rest_reference`: the web page's REST API, from its OpenAPI description
  (:func:`~opencode_memoryd.web.openapi.openapi_document`).

The site's build (``mkdocs.yml``, plugin ``gen-files``, script ``docs/gen_reference.py``)
writes them under ``reference/`` at every build, so a reference page can never disagree with
the code. ``python -m opencode_memoryd.cli.reference DIR`` writes them into ``DIR`` (to read
them without building the site).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: Columns of the generated ``--help`` texts (fixed, so the page is the same on every machine).
HELP_COLUMNS = 100

_GENERATED = ("<!-- Generated from the code by `python -m opencode_memoryd.cli.reference`; "
              "do not edit. -->\n\n")


def _subcommands(parser: Any) -> Iterator[tuple[str, Any]]:
    """``(name, parser)`` of each subcommand of ``parser`` (an ``argparse`` parser), in the
    order ``--help`` lists them."""
    for action in getattr(parser, "_actions", ()):
        choices = getattr(action, "choices", None)
        if action.__class__.__name__ == "_SubParsersAction" and isinstance(choices, dict):
            yield from choices.items()


def cli_reference() -> str:
    """The command-line reference: the top level's and every (sub)command's ``--help``
    text, each in a code block under its own heading (``## opencode-memoryd maintain``)."""
    from opencode_memoryd.cli.main import _parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_COLUMNS)
    try:
        top = _parser()
        out = ["# Command line", "", _GENERATED.strip(), "",
               "Every command and its options, as `--help` prints them. What the commands do, "
               "with examples: [Commands](commands.md); exit codes: "
               "[Exit codes](exit-codes.md).", "",
               "## opencode-memoryd", "", "```text", top.format_help().rstrip(), "```", ""]
        for name, sub in _subcommands(top):
            out += [f"## opencode-memoryd {name}", "", "```text", sub.format_help().rstrip(),
                    "```", ""]
            for child, leaf in _subcommands(sub):
                out += [f"### opencode-memoryd {name} {child}", "", "```text",
                        leaf.format_help().rstrip(), "```", ""]
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved
    return "\n".join(out)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def config_reference() -> str:
    """The configuration reference: a section per ``[table]`` of the config file, its
    description, and a table of its keys (key, default as TOML, description with bounds)."""
    import tomli_w

    from opencode_memoryd.config.example import TUNING_KEYS
    from opencode_memoryd.config.schema import Config

    defaults = Config()
    out = ["# Configuration", "", _GENERATED.strip(), "",
           "Every key is optional; the value shown is the default. The file is "
           "`$XDG_CONFIG_HOME/opencode-memoryd/config.toml` (`OPENCODE_MEMORYD_CONFIG` and "
           "`--config PATH` override the path); `opencode-memoryd config init` writes it "
           "commented, as [`config.example.toml`](config.example.toml) is (the "
           "repository's copy of it). Unknown keys and values out of range are errors "
           "(exit 78), each reported with its key path. Keys marked *(tuning)* adjust the "
           "machinery and are seldom changed; the example file only names them.", ""]
    for section, sfield in Config.model_fields.items():
        model = sfield.annotation
        values = getattr(defaults, section).model_dump(mode="json")
        out += [f"## [{section}]", "", _cell(sfield.description or ""), "",
                "| key | default | what it does |", "| --- | --- | --- |"]
        for key, kfield in getattr(model, "model_fields", {}).items():
            default = tomli_w.dumps({key: values[key]}).strip().split(" = ", 1)[1]
            tuning = " (tuning)" if f"{section}.{key}" in TUNING_KEYS else ""
            out.append(f"| `{key}`{tuning} | `{_cell(default)}` "
                       f"| {_cell(kfield.description or '')} |")
        out.append("")
    return "\n".join(out)


_CODE_LINE = re.compile(r"^  (\d+)\s+(.*)$")


def exit_codes() -> list[tuple[int, str]]:
    """``[(code, meaning)]`` as ``--help`` lists them (the continuation lines joined)."""
    from opencode_memoryd.cli.exits import EXIT_CODES_HELP

    codes: list[tuple[int, str]] = []
    for line in EXIT_CODES_HELP.splitlines()[1:]:
        match = _CODE_LINE.match(line)
        if match:
            codes.append((int(match.group(1)), match.group(2).strip()))
        elif codes and line.strip():
            code, text = codes[-1]
            codes[-1] = (code, f"{text} {line.strip()}")
    return codes


def exit_codes_reference() -> str:
    """The exit codes page: a table of every code and its meaning."""
    out = ["# Exit codes", "", _GENERATED.strip(), "",
           "Every command exits with one of these codes (`opencode-memoryd --help` lists "
           "them too). The service files do not restart the daemon after 78: restarting "
           "cannot fix a config.", "", "| code | meaning |", "| --- | --- |"]
    out += [f"| {code} | {_cell(text)} |" for code, text in exit_codes()]
    return "\n".join(out) + "\n"


def rest_reference() -> str:
    """The REST API page: each route of the OpenAPI description with its parameters, body
    and answer, and the error statuses."""
    from opencode_memoryd.web.openapi import OPENAPI_PATH, openapi_document

    doc = openapi_document()
    out = ["# REST API", "", _GENERATED.strip(), "",
           "The web page's API, served by the daemon when `[web] enabled` is on "
           f"([The web page](../how-to/web.md)). Its OpenAPI description is at `{OPENAPI_PATH}`. "
           "Every answer but the description itself is in the control socket's envelope: "
           "`{\"result\": …}`, or `{\"error\": {\"type\": \"…\", \"message\": \"…\", "
           "\"kind\": …}}` with the status the error carries.", ""]
    errors: dict[str, str] = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            out += [f"## `{method.upper()} {path}`", "", _cell(op.get("summary", "")), ""]
            params = [p for p in op.get("parameters", [])]
            if params:
                out += ["| parameter | in | required | description |", "| --- | --- | --- | --- |"]
                out += [f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else 'no'} "
                        f"| {_cell(p.get('description', ''))} |" for p in params]
                out.append("")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            props = body.get("schema", {}).get("properties")
            if props:
                out += ["Body (JSON): " + ", ".join(f"`{k}`" for k in props), ""]
            if op.get("x-result"):
                out += [f"Answer `result`: `{_cell(str(op['x-result']))}`", ""]
            for code, resp in op.get("responses", {}).items():
                if code != "200":
                    errors.setdefault(code, resp.get("description", ""))
    out += ["## Error statuses", "", "| status | meaning |", "| --- | --- |"]
    out += [f"| {code} | {_cell(text)} |" for code, text in sorted(errors.items())]
    return "\n".join(out) + "\n"


def config_example() -> str:
    """The commented example config file (``config.example.toml``), from the schema."""
    from opencode_memoryd.config.example import render_example

    return render_example()


#: The generated pages: file name under ``reference/`` -> the function that writes it.
PAGES: dict[str, Callable[[], str]] = {
    "config.example.toml": config_example,
    "cli.md": cli_reference,
    "config.md": config_reference,
    "exit-codes.md": exit_codes_reference,
    "rest.md": rest_reference,
}


def main(argv: list[str] | None = None) -> int:
    """``python -m opencode_memoryd.cli.reference DIR``: write every page into ``DIR``
    (exit 0; 2 without exactly one argument)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m opencode_memoryd.cli.reference DIR", file=sys.stderr)
        return 2
    target = Path(args[0])
    target.mkdir(parents=True, exist_ok=True)
    for name, render in PAGES.items():
        (target / name).write_text(render(), encoding="utf-8")
    print(json.dumps(sorted(PAGES)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

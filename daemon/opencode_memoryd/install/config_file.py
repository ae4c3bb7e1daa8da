"""The config file as ``install`` leaves it: the commented example when there is none,
with the extraction mode (and, for LLM mode, the ``[llm]`` keys) set.

The file is edited with tomlkit, so every comment, key and blank line the user wrote
stays as it was; only the keys named here change. The plan is a
:class:`~.files.Plan` like the other install files (a diff, nothing written until
:func:`~.files.carry_out`), and a file already as asked gives an unchanged plan.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from opencode_memoryd.errors import InstallRefusedError
from opencode_memoryd.install.files import Plan, plan_change, read_text

__all__ = ["LlmChoice", "effective_mode", "plan_config"]

#: The config file is private: it may name where keys come from.
CONFIG_MODE = 0o600


@dataclass(frozen=True, slots=True)
class LlmChoice:
    """The ``[llm]`` keys LLM mode writes.

    Attributes:
        base_url: the OpenAI-compatible endpoint.
        model: the model id.
        api_key_env: the variable holding the key, or empty.
        api_key_from: ``"opencode:<provider>"``, or empty.
    """

    base_url: str
    model: str
    api_key_env: str = ""
    api_key_from: str = ""


def _table(doc: object, name: str) -> dict[str, object]:
    import tomlkit

    assert isinstance(doc, dict)
    table = doc.get(name)
    if table is None:
        table = tomlkit.table()
        doc[name] = table
    if not isinstance(table, dict):
        raise ValueError(f"[{name}] is not a table")
    return table


def effective_mode(text: str | None) -> str:
    """The extraction mode a config text gives: ``"llm"`` or ``"rules"`` (``auto`` is llm
    when ``llm.base_url`` is set). ``None`` (no file) gives the default, rules; a text that
    is not TOML gives a phrase that says so."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    if text is None:
        return "rules"
    try:
        doc = tomlkit.parse(text).unwrap()
    except TOMLKitError:
        return "unknown (the file is not valid TOML)"
    extraction = doc.get("extraction", {})
    llm = doc.get("llm", {})
    mode = extraction.get("mode", "auto") if isinstance(extraction, dict) else "auto"
    base_url = llm.get("base_url", "") if isinstance(llm, dict) else ""
    if mode == "auto":
        return "llm" if base_url else "rules"
    return str(mode)


def plan_config(path: Path, mode: Literal["rules", "llm"] | None,
                llm: LlmChoice | None = None) -> Plan:
    """The change that leaves ``path`` with extraction ``mode`` (``None``: as it is) and,
    for ``"llm"``, the keys of ``llm``. A missing file starts as the commented example
    (:func:`~opencode_memoryd.config.example.render_example`), mode 0600.

    Raises:
        InstallRefusedError: the file is not TOML, or a table we set is not a table.
        ValueError: ``mode`` is ``"llm"`` without ``llm``.
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from opencode_memoryd.config.example import render_example

    old = read_text(path)
    try:
        doc = tomlkit.parse(render_example() if old is None else old)
    except TOMLKitError as exc:
        raise InstallRefusedError(str(path), f"not valid TOML: {exc}") from None
    try:
        if mode == "llm":
            if llm is None:
                raise ValueError("LLM mode needs the [llm] keys")
            _table(doc, "extraction")["mode"] = "llm"
            table = _table(doc, "llm")
            for key in ("base_url", "model", "api_key_env", "api_key_from"):
                if table.get(key, None) != getattr(llm, key):
                    table[key] = getattr(llm, key)
        elif mode == "rules" and effective_mode(doc.as_string()) != "rules":
            _table(doc, "extraction")["mode"] = "rules"
    except ValueError as exc:
        if mode == "llm" and llm is None:
            raise
        raise InstallRefusedError(str(path), str(exc)) from None
    new = doc.as_string()
    return replace(plan_change(path, "config", old, new), mode=CONFIG_MODE)

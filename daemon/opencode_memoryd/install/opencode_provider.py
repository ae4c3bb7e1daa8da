"""The model the user already set up in OpenCode, as an ``[llm]`` for extraction.

:func:`find_provider` reads OpenCode's global config (``config.json``, ``opencode.json``
and ``opencode.jsonc`` of its config folder, merged in that order as OpenCode does), takes
``small_model`` (OpenCode's model for background work), else ``model``, both written
``"provider/model"``, and works out the provider's OpenAI-compatible base URL and where its
API key comes from:

- a custom provider (``provider.<id>`` with ``npm: "@ai-sdk/openai-compatible"`` or
  ``"@ai-sdk/openai"``) gives ``options.baseURL``; a built-in one of :data:`BUILTIN` has a
  known URL (its documented OpenAI-compatible endpoint);
- the key: ``options.apiKey = "{env:VAR}"`` names a variable (we store the name);
  any other ``options.apiKey`` is a key held in OpenCode's config, and an entry of type
  ``api`` in ``$XDG_DATA_HOME/opencode/auth.json`` (what ``opencode auth login`` stores)
  is one held by OpenCode too: both are read at run time by :func:`opencode_api_key`, never
  copied, and only with the user's consent (:attr:`ProviderChoice.needs_consent`); a
  built-in provider's variable (e.g. ``OPENAI_API_KEY``) when it is set; none for a custom
  provider with no key.

``{env:VAR}`` in ``baseURL`` is filled from the environment, as OpenCode does when it
reads its config. :func:`check_endpoint` asks the endpoint once (``GET <base>/models``)
before the choice is written.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from opencode_memoryd.config.paths import xdg_data_home
from opencode_memoryd.install import jsonc
from opencode_memoryd.install.opencode_plugin import plugin_dirs

__all__ = [
    "BUILTIN",
    "KEY_FROM_PREFIX",
    "ProviderChoice",
    "auth_path",
    "check_endpoint",
    "find_provider",
    "opencode_api_key",
    "opencode_config",
]

#: ``[llm] api_key_from`` values start with this, then the OpenCode provider id.
KEY_FROM_PREFIX = "opencode:"

#: Built-in OpenCode providers with an OpenAI-compatible endpoint: id -> (base URL, the
#: key's variable). URLs from each vendor's API reference; variable names from models.dev,
#: the provider catalogue OpenCode reads.
BUILTIN: dict[str, tuple[str, str]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "groq": ("https://api.groq.com/openai/v1", "GROQ_API_KEY"),
    "deepseek": ("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "mistral": ("https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
    "xai": ("https://api.x.ai/v1", "XAI_API_KEY"),
    "google": ("https://generativelanguage.googleapis.com/v1beta/openai",
               "GOOGLE_GENERATIVE_AI_API_KEY"),
}
_COMPATIBLE_NPM = ("@ai-sdk/openai-compatible", "@ai-sdk/openai")
_CONFIG_NAMES = ("config.json", "opencode.json", "opencode.jsonc")  # merged in this order
_ENV_REF = re.compile(r"\{env:([^}]+)\}")
_ONLY_ENV_REF = re.compile(r"^\{env:([A-Za-z_][A-Za-z0-9_]*)\}$")


@dataclass(frozen=True, slots=True)
class ProviderChoice:
    """OpenCode's model as an ``[llm]``, or why it cannot be one.

    Attributes:
        provider: OpenCode's provider id (``"openai"``, ``"stub"``); empty when no model.
        model: the model id sent to the endpoint.
        source: which OpenCode setting named it (``"small_model"`` or ``"model"``).
        base_url: the OpenAI-compatible endpoint; empty when unusable.
        api_key_env: the variable holding the key (``[llm] api_key_env``), or empty.
        api_key_from: ``"opencode:<provider>"`` when OpenCode holds the key, else empty.
        key_place: where OpenCode holds it (for the consent question), or empty.
        problem: why this model cannot be used; empty when it can.
    """

    provider: str = ""
    model: str = ""
    source: str = ""
    base_url: str = ""
    api_key_env: str = ""
    api_key_from: str = ""
    key_place: str = ""
    problem: str = ""

    @property
    def usable(self) -> bool:
        """Whether an endpoint and a key source were found."""
        return not self.problem and bool(self.base_url)

    @property
    def needs_consent(self) -> bool:
        """Whether the key is OpenCode's own (read at run time only with the user's yes)."""
        return bool(self.api_key_from)


def _config_dirs(env: Mapping[str, str]) -> list[Path]:
    return [folder.parent for folder in plugin_dirs(env)]


def opencode_config(env: Mapping[str, str] | None = None) -> dict[str, object]:
    """OpenCode's global config: its files merged (later files win key by key at the top
    level and inside ``provider``), ``$XDG_CONFIG_HOME/opencode`` first, then
    ``$OPENCODE_CONFIG_DIR``. A file that is missing, unreadable or not JSONC is skipped
    (OpenCode itself reports those)."""
    env = os.environ if env is None else env
    merged: dict[str, object] = {}
    for folder in reversed(_config_dirs(env)):
        for name in _CONFIG_NAMES:
            try:
                value = jsonc.loads((folder / name).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError):
                continue
            if not isinstance(value, dict):
                continue
            providers = {**_dict(merged.get("provider")), **_dict(value.get("provider"))}
            merged.update(value)
            if providers:
                merged["provider"] = providers
    return merged


def auth_path(env: Mapping[str, str] | None = None) -> Path:
    """OpenCode's stored credentials: ``$XDG_DATA_HOME/opencode/auth.json``."""
    return xdg_data_home(os.environ if env is None else env) / "opencode" / "auth.json"


def _dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _auth_entry(provider: str, env: Mapping[str, str]) -> dict[str, object]:
    try:
        value = json.loads(auth_path(env).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return _dict(_dict(value).get(provider))


def _fill_env(text: str, env: Mapping[str, str]) -> str:
    return _ENV_REF.sub(lambda m: env.get(m.group(1).strip(), ""), text)


def find_provider(env: Mapping[str, str] | None = None) -> ProviderChoice:
    """OpenCode's ``small_model`` (else ``model``) as an ``[llm]`` (see the module
    docstring). Reads OpenCode's config and whether ``auth.json`` has an entry for the
    provider; never a key's value. Never raises: a problem is in
    :attr:`ProviderChoice.problem`."""
    env = os.environ if env is None else env
    config = opencode_config(env)
    source = next((k for k in ("small_model", "model")
                   if isinstance(config.get(k), str) and config.get(k)), "")
    if not source:
        return ProviderChoice(problem="OpenCode's config sets neither small_model nor model")
    provider, _, model = str(config[source]).partition("/")
    if not provider or not model:
        return ProviderChoice(source=source, problem=f"OpenCode's {source} "
                              f"{config[source]!r} is not written provider/model")
    choice = ProviderChoice(provider=provider, model=model, source=source)
    spec = _dict(_dict(config.get("provider")).get(provider))
    options = _dict(spec.get("options"))
    url = options.get("baseURL")
    npm = spec.get("npm")
    if isinstance(url, str) and url and (npm in _COMPATIBLE_NPM or provider in BUILTIN):
        base_url = _fill_env(url, env).rstrip("/")
    elif provider in BUILTIN:
        base_url = BUILTIN[provider][0]
    else:
        why = (f"its package {npm} does not speak the OpenAI API" if isinstance(npm, str)
               else "its OpenAI-compatible endpoint is not known")
        return _with(choice, problem=f"OpenCode's provider {provider!r}: {why}")
    return _with_key(_with(choice, base_url=base_url), provider, options, env)


def _with_key(choice: ProviderChoice, provider: str, options: dict[str, object],
              env: Mapping[str, str]) -> ProviderChoice:
    """``choice`` with where its key comes from (see :func:`find_provider`): the
    provider's ``options.apiKey`` (an ``{env:VAR}`` reference names the variable), the
    provider's usual variable when set, OpenCode's stored ``api`` credentials; else a
    problem when the provider needs a key, else ``choice`` (no key needed)."""
    key = options.get("apiKey")
    if isinstance(key, str) and key:
        named = _ONLY_ENV_REF.match(key.strip())
        if named:
            return _with(choice, api_key_env=named.group(1))
        return _with(choice, api_key_from=KEY_FROM_PREFIX + provider,
                     key_place=f"options.apiKey of provider {provider!r} in OpenCode's config")
    builtin_var = BUILTIN.get(provider, ("", ""))[1]
    if builtin_var and env.get(builtin_var):
        return _with(choice, api_key_env=builtin_var)
    entry = _auth_entry(provider, env)
    if entry.get("type") == "api" and entry.get("key"):
        return _with(choice, api_key_from=KEY_FROM_PREFIX + provider,
                     key_place=f"OpenCode's stored credentials ({auth_path(env)})")
    if entry.get("type") == "oauth":
        return _with(choice, problem=f"OpenCode signs in to {provider!r} with OAuth; "
                                     "that token is not an API key")
    if builtin_var:
        return _with(choice, problem=f"no key for {provider!r}: set {builtin_var}, or "
                                     f"`opencode auth login` for {provider}")
    return choice  # a custom endpoint that takes no key (Ollama, LM Studio, a proxy)


def _with(choice: ProviderChoice, **changes: str) -> ProviderChoice:
    from dataclasses import replace

    return replace(choice, **changes)


def opencode_api_key(key_from: str, env: Mapping[str, str] | None = None) -> str | None:
    """The key OpenCode holds for the provider named in ``key_from``
    (``"opencode:<provider>"``), read now: the provider's ``options.apiKey`` in OpenCode's
    config (``{env:VAR}`` filled from ``env``), else the ``key`` of its ``api`` entry in
    ``auth.json``. ``None`` when ``key_from`` is not of that form or nothing is found."""
    env = os.environ if env is None else env
    if not key_from.startswith(KEY_FROM_PREFIX):
        return None
    provider = key_from[len(KEY_FROM_PREFIX):]
    spec = _dict(_dict(opencode_config(env).get("provider")).get(provider))
    key = _dict(spec.get("options")).get("apiKey")
    if isinstance(key, str) and _fill_env(key, env).strip():
        return _fill_env(key, env).strip()
    entry = _auth_entry(provider, env)
    stored = entry.get("key")
    if entry.get("type") in ("api", "wellknown") and isinstance(stored, str) and stored:
        return stored
    return None


def check_endpoint(base_url: str, api_key: str | None, *, timeout_seconds: float = 10.0
                   ) -> str:
    """Ask the endpoint once: ``GET <base_url>/models`` (OpenAI's model list, cheap and
    unbilled). Returns an empty string when it answers 200, else what went wrong, for
    the user (unreachable, a refused key, a 404 that hints at a missing ``/v1``)."""
    import httpx  # here: only `install` asks

    url = base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_seconds)
    except httpx.HTTPError as exc:
        return f"endpoint unreachable: {url}: {exc or type(exc).__name__}"
    if response.status_code == 200:
        return ""
    if response.status_code in (401, 403):
        return f"the endpoint refused the key (HTTP {response.status_code} from {url})"
    if response.status_code == 404 and not base_url.rstrip("/").endswith("/v1"):
        return f"HTTP 404 from {url}: does the base URL lack /v1?"
    return f"HTTP {response.status_code} from {url}"

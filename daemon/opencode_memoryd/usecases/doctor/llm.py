"""``llm-key`` and ``llm-endpoint``: in llm mode, the API key variable is set and the
endpoint answers one tiny JSON request with the configured model.

The request goes through the same chat client capture uses (same ``json_mode``), with a
short timeout and no retry; it costs a few tokens.
"""

from __future__ import annotations

import json
import time

from opencode_memoryd.errors import ExtractionError, UpstreamError
from opencode_memoryd.usecases.doctor.model import FAIL, OK, SKIP, WARN, Check, Context

PROBE_SYSTEM = "You are a health check. Answer with a JSON object only."
PROBE_USER = 'Reply with {"ok": true}.'
PROBE_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"], "additionalProperties": False}

#: What to do about each kind of endpoint failure (``UpstreamError.kind``).
_FIXES = {
    "auth": "the endpoint refused the key: check ${var}, and that the daemon's "
            "environment has it too",
    "not_found": "check llm.model ({model}) and llm.base_url ({url})",
    "connection": "start the LLM server, or fix llm.base_url ({url})",
    "timeout": "the endpoint did not answer in {timeout:g} s: check that it is up and "
               "not overloaded",
    "rate_limit": "the endpoint is rate limiting or out of quota: check the account; "
                  "the daemon retries later by itself",
}


def llm_checks(ctx: Context) -> list[Check]:
    """``llm-key`` then ``llm-endpoint``; one ``llm`` skip outside llm mode."""
    if ctx.app.extraction_mode() != "llm":
        return [Check("llm", SKIP, "rules mode: no LLM endpoint is used")]
    return [key_check(ctx), endpoint_check(ctx)]


def key_check(ctx: Context) -> Check:
    """Whether ``llm.api_key_env`` names a variable that is set here."""
    var = ctx.app.config.llm.api_key_env
    if not var:
        return Check("llm-key", SKIP, "llm.api_key_env is empty: no key is sent")
    if ctx.app.env.get(var):
        return Check("llm-key", OK, f"${var} is set")
    return Check("llm-key", WARN, f"${var} is not set: no key is sent",
                 f"export {var} where the daemon runs (and in this shell), or set "
                 'llm.api_key_env = "" for an endpoint that needs no key')


def endpoint_check(ctx: Context) -> Check:
    """One tiny JSON request to the configured endpoint and model."""
    llm = ctx.app.config.llm
    timeout = min(llm.timeout_seconds, ctx.probes.llm_timeout_seconds)
    where = f"{llm.base_url} (model {llm.model})"
    client = ctx.app.build_chat_client(timeout_seconds=timeout, max_retries=0)
    started = time.monotonic()
    try:
        reply = client.complete_json(system=PROBE_SYSTEM, user=PROBE_USER,
                                     schema=PROBE_SCHEMA, schema_name="health_check")
    except UpstreamError as exc:
        fix = _FIXES.get(exc.kind, "check llm.base_url, llm.model and llm.json_mode")
        return Check("llm-endpoint", FAIL, f"{where}: {exc.kind}: {exc}",
                     fix.format(var=llm.api_key_env, model=llm.model, url=llm.base_url,
                                timeout=timeout))
    except ExtractionError as exc:
        return Check("llm-endpoint", FAIL, f"{where}: {exc}",
                     "choose a model that answers in text, or set llm.json_mode")
    finally:
        client.close()
    ms = (time.monotonic() - started) * 1000
    try:
        answer = json.loads(reply.content)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return Check("llm-endpoint", WARN,
                     f"{where} answered in {ms:.0f} ms, but not with a JSON object",
                     'set llm.json_mode = "json_object" (or "none"), or choose a model '
                     "that follows JSON schemas")
    return Check("llm-endpoint", OK, f"{where} answered in {ms:.0f} ms "
                                     f"(model {reply.model})")

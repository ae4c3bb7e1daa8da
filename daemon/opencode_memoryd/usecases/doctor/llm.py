"""``llm-key``, ``llm-endpoint`` and ``llm-given-up``: in llm mode, the API key variable is
set, the endpoint answers one tiny JSON request with the configured model, and no chunk
of turns was given up after repeated identical failures.

The request goes through the same chat client capture uses (the same structured-output
negotiation, remembered in the state file when it exists), with a short timeout and no
retry; it costs a few tokens. The check names the structured-output mode that works.
"""

from __future__ import annotations

import json
import time

from opencode_memoryd.errors import ExtractionError, MemorydError, UpstreamError
from opencode_memoryd.extract.llm_extractor import reply_token_cap
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
    """``llm-key``, ``llm-endpoint`` and ``llm-given-up``; one ``llm`` skip outside llm
    mode."""
    if ctx.app.extraction_mode() != "llm":
        return [Check("llm", SKIP, "rules mode: no LLM endpoint is used")]
    return [key_check(ctx), endpoint_check(ctx), given_up_check(ctx)]


def given_up_check(ctx: Context) -> Check:
    """Whether chunks of turns were given up after repeated identical failures."""
    state = ctx.state()
    given_up = state.failures.chunk_failures(status="given_up") if state is not None else []
    if not given_up:
        return Check("llm-given-up", OK, "no chunk of turns was given up")
    first = given_up[0]
    return Check("llm-given-up", WARN,
                 f"{len(given_up)} chunk(s) of turns failed the same way too often and were "
                 f"captured by the rules only; e.g. session {first.session_id}: "
                 f"{first.reason}",
                 "fix the cause (llm.model, llm.max_output_tokens, llm.json_mode), then run "
                 "`opencode-memoryd maintain --all --retry-failed`")


def key_check(ctx: Context) -> Check:
    """Whether ``llm.api_key_env`` names a variable that is set here (or, with
    ``llm.api_key_from``, whether OpenCode holds a key for that provider)."""
    source = ctx.app.config.llm.api_key_from
    if source:
        from opencode_memoryd.install.opencode_provider import opencode_api_key

        if opencode_api_key(source, ctx.app.env):
            return Check("llm-key", OK, f"the key comes from OpenCode ({source})")
        return Check("llm-key", WARN, f"OpenCode holds no key for {source}: no key is sent",
                     "set the provider's key in OpenCode (`opencode auth login`), or set "
                     "llm.api_key_env instead of llm.api_key_from")
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
    try:
        state = ctx.state()
        modes = state.llm if state is not None else None
    except MemorydError:  # the state file's own check reports it
        modes = None
    client = ctx.app.build_chat_client(timeout_seconds=timeout, max_retries=0, modes=modes)
    x = ctx.app.config.extraction
    cap = llm.max_output_tokens or reply_token_cap(x.max_memories_per_chunk,
                                                   x.max_memory_chars)
    started = time.monotonic()
    try:
        reply = client.complete_json(system=PROBE_SYSTEM, user=PROBE_USER,
                                     schema=PROBE_SCHEMA, schema_name="health_check",
                                     max_tokens=cap)
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
    mode = client.json_mode
    structured = f"structured output: {mode}" + (
        "" if mode == llm.json_mode else f", since the endpoint refused {llm.json_mode}")
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
                                     f"(model {reply.model}; {structured})")

// Test stand-in: times the `experimental.chat.system.transform` hooks of the plugins that run
// after it. Its own system hook starts the clock; its `chat.params` hook, which OpenCode calls
// once every system hook of the request is done, stops it. It must run first: load it from
// the config's `plugin` list (OpenCode runs those before the plugin folder's files). Each
// request appends one JSON line to $HOOK_TIMER_LOG:
//   {session, model, ms, before, after}
// `before`/`after`: the system prompt's parts when the clock started and stopped, so a test
// can tell whether another plugin added one (and that none ran before this one).
import { appendFileSync } from "node:fs"

const LOG = process.env.HOOK_TIMER_LOG

export const HookTimer = async () => {
  const started = new Map() // "session/model" -> {at, before, system}
  const key = (input) => `${input?.sessionID}/${input?.model?.id}`
  return {
    "experimental.chat.system.transform": async (input, output) => {
      if (!input?.sessionID || !Array.isArray(output?.system)) return
      started.set(key(input), { at: performance.now(), before: output.system.length, system: output.system })
    },
    "chat.params": async (input) => {
      const s = started.get(key(input))
      if (!s || !LOG) return
      started.delete(key(input))
      appendFileSync(LOG, JSON.stringify({
        session: input.sessionID, model: input.model?.id, ms: performance.now() - s.at,
        before: s.before, after: s.system.length,
      }) + "\n")
    },
  }
}

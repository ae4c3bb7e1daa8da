// Test stand-in: fetches a context block over the Unix socket $MEMORYD_SOCKET, as the memoryd
// plugin does, with a 1.5 s timeout, and pushes it when it gets one. Every fetch appends one
// JSON line {ms, ok, error} to $PLUGIN_LOG, so a test can measure the time the hook added.
import { appendFileSync } from "node:fs"

const SOCK = process.env.MEMORYD_SOCKET
const LOG = process.env.PLUGIN_LOG

export const DeadSocket = async () => ({
  "experimental.chat.system.transform": async (input, output) => {
    if (!input.sessionID || /title generator/i.test(output.system[0] ?? "")) return
    const start = performance.now()
    let text = ""
    let error = null
    try {
      const res = await fetch("http://memoryd/v1/context", { unix: SOCK, signal: AbortSignal.timeout(1500) })
      text = res.ok ? await res.text() : ""
    } catch (e) {
      error = String(e?.code ?? e?.name ?? e)
    }
    if (LOG) appendFileSync(LOG, JSON.stringify({ ms: performance.now() - start, ok: !error, error }) + "\n")
    if (text) output.system.push(text)
  },
})

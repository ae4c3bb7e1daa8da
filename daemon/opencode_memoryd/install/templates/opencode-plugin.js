// opencode-memoryd plugin. Written by `opencode-memoryd install-opencode`, which overwrites
// it; `opencode-memoryd uninstall-opencode` removes it.
//
// Once per session it asks the opencode-memoryd daemon, over the daemon's Unix socket, for
// a block of memories and adds that same text to the system prompt of every model request
// of the session. The text never changes within a session, so the provider's cached prompt
// prefix stays valid. Once per user message (OpenCode 1.x) it asks for the memories that
// match that message and that the session was not given yet, and adds them to the message
// itself as a synthetic text part: OpenCode keeps it in the session (hidden in its UI) and
// sends the same bytes with that message in every later request, so the system prompt
// never changes and the cached conversation stays valid. It waits for the part at most
// RECALL_WAIT_MS before the message is saved; a part that comes later is dropped, and only
// a part that was added is reported back as given. Before a tool reads or edits a file or
// runs a command, it asks for the memories about that file or command (and after a command
// fails, about its error) and adds them at the end of the tool's output (2.x: of its
// result's content). When the daemon is down, slow or answers an error, the block, part or
// note is empty and OpenCode runs as if this plugin were not installed: no error is thrown
// or printed.
// Nothing is sent unless the socket is this user's (see ownSocket).
//
// One file for OpenCode 1.x and 2.x: the default export is { id, server, setup }.
// - OpenCode 1.x (1.18.29 and later) calls `server(input)` and uses the hooks it returns.
//   1.18.33 reads a default export with an `id` or a `server` as a module plugin, requires
//   `id` for a file plugin, calls `server` and ignores the other keys; a default export
//   with both `server` and `tui` is refused (read in the shipped opencode-ai 1.18.33
//   binary: the loader that reports "must default export an object with server()" and
//   "Path plugin ... must export id").
// - OpenCode 2.x decodes the default export as `{ id: string, setup: function }` (or
//   `effect`), refusing the file otherwise, and calls `setup(ctx)`; the plugin registers
//   `ctx.session.hook("context", ...)` (anomalyco/opencode 07db2b92
//   packages/core/src/plugin/module.ts; 0a80062d packages/core/src/plugin/promise.ts;
//   03545fd3 packages/plugin/src/promise/session.ts), and `ctx.tool.hook("execute.before")`
//   and `("execute.after")` when the context has them (see toolNotes).
// Neither imports anything of OpenCode's: only Node built-ins are used.
//
// The socket is found when a session asks, with the rules the opencode-memoryd command
// uses (see socketPath), so a daemon started later or from another shell is found.

import { lstatSync, readFileSync, realpathSync } from "node:fs"
import { createHash, randomBytes } from "node:crypto"
import { request as httpRequest } from "node:http"
import { homedir, tmpdir } from "node:os"
import { dirname, isAbsolute, join } from "node:path"

const APP = "opencode-memoryd"
// The first line of every injected block, so that opencode-memoryd can tell its own text
// apart when it reads the session back.
const MARKER = "<!-- opencode-memoryd context -->"
// The start of the block's last line, which ends with a hash of the lines between.
const END_PREFIX = "<!-- opencode-memoryd context end "
// The first line and the start of the last line of a user message's recall part.
const RECALL_MARKER = "<!-- opencode-memoryd recall -->"
const RECALL_END_PREFIX = "<!-- opencode-memoryd recall end "
const TIMEOUT_MS = 1500
// The longest a user message waits for its recall part (the block, when the session has
// none yet, and the part), in ms.
const RECALL_WAIT_MS = 1500
const MAX_QUERY_CHARS = 2000
// Sessions whose block is kept; the oldest is dropped first.
const MAX_SESSIONS = 500

// A block is used only whole: the marker first, and a closing line carrying the first 16 hex
// digits of the SHA-256 of the lines between (anything else, e.g. a cut answer, gives none).
// A recall part likewise, with its own marker and closing line.
const sealed = (text, marker = MARKER, endPrefix = END_PREFIX) => {
  const lines = text.split("\n")
  while (lines.length && lines[lines.length - 1] === "") lines.pop()
  if (lines.length < 3 || lines[0] !== marker) return false
  const body = lines.slice(1, -1).join("\n")
  const digest = createHash("sha256").update(body, "utf8").digest("hex").slice(0, 16)
  return lines[lines.length - 1] === endPrefix + digest + " -->"
}

// Whether the socket is certainly this user's: its folder a real folder (not a link) owned
// by this user and closed to others (the daemon makes it 0700), the socket file in it this
// user's. Another user who made the folder first (a shared XDG_RUNTIME_DIR or TMPDIR)
// would otherwise serve the block and read each session's first message.
const ownSocket = (path) => {
  try {
    if (typeof process.getuid !== "function") return false
    const uid = process.getuid()
    const folder = lstatSync(dirname(path))
    if (folder.isSymbolicLink() || !folder.isDirectory() || folder.uid !== uid) return false
    if ((folder.mode & 0o077) !== 0) return false
    const file = lstatSync(path)
    return file.isSocket() && file.uid === uid
  } catch {
    return false
  }
}

// --- Where the daemon's socket is -------------------------------------------------------

const env = (name) => process.env[name] ?? ""
const home = () => env("HOME") || homedir()
const expandHome = (value) =>
  value === "~" || value.startsWith("~/") ? join(home(), value.slice(2)) : value
// $NAME when it is an absolute path, else the fallback under the home folder (XDG rules).
const xdg = (name, fallback) => (isAbsolute(env(name)) ? env(name) : join(home(), fallback))
const readText = (path) => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return ""
  }
}

// `dir` of the `[state]` table of the config file, or "": a basic ("...") or literal
// ('...') string on its own line.
const configuredStateDir = (toml) => {
  let table = ""
  for (const raw of toml.split(/\r?\n/)) {
    const line = raw.trim()
    const header = /^\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(#.*)?$/.exec(line)
    if (header) {
      table = header[1]
      continue
    }
    if (table !== "state") continue
    const basic = /^dir\s*=\s*("(?:[^"\\]|\\.)*")\s*(#.*)?$/.exec(line)
    if (basic) {
      try {
        return String(JSON.parse(basic[1])).trim()
      } catch {
        return ""
      }
    }
    const literal = /^dir\s*=\s*'([^']*)'\s*(#.*)?$/.exec(line)
    if (literal) return literal[1].trim()
  }
  return ""
}

// The daemon's state folder: `[state] dir` of the config file ($OPENCODE_MEMORYD_CONFIG,
// else $XDG_CONFIG_HOME/opencode-memoryd/config.toml), else $XDG_STATE_HOME/opencode-memoryd.
const stateDir = () => {
  const named = env("OPENCODE_MEMORYD_CONFIG")
  const config = named ? expandHome(named) : join(xdg("XDG_CONFIG_HOME", ".config"), APP, "config.toml")
  const dir = configuredStateDir(readText(config))
  return dir ? expandHome(dir) : join(xdg("XDG_STATE_HOME", ".local/state"), APP)
}

// Where the socket may be, in order: $OPENCODE_MEMORYD_SOCKET alone when set; else the
// path daemon.json in the state folder names (the daemon writes the one it uses), then
// the paths the daemon would choose: $XDG_RUNTIME_DIR/opencode-memoryd/control.sock,
// /run/user/<uid>/opencode-memoryd/control.sock (the runtime folder a process started
// without XDG_RUNTIME_DIR, e.g. after `su -`, does not know), <state>/control.sock, and
// the shortened <tmp>/opencode-memoryd-<uid>/<hash>.sock of a path too long for a socket.
const socketCandidates = () => {
  const override = env("OPENCODE_MEMORYD_SOCKET")
  if (override) return [override]
  const state = stateDir()
  const found = []
  try {
    const info = JSON.parse(readText(join(state, "daemon.json")) || "{}")
    if (typeof info?.socket === "string" && info.socket) found.push(info.socket)
  } catch {}
  const uid = typeof process.getuid === "function" ? process.getuid() : undefined
  if (isAbsolute(env("XDG_RUNTIME_DIR"))) found.push(join(env("XDG_RUNTIME_DIR"), APP, "control.sock"))
  if (uid !== undefined) found.push(join("/run/user", String(uid), APP, "control.sock"))
  found.push(join(state, "control.sock"))
  if (uid !== undefined) {
    let real = state
    try {
      real = realpathSync(state)
    } catch {}
    const digest = createHash("sha256").update(real, "utf8").digest("hex").slice(0, 16)
    found.push(join(tmpdir(), `${APP}-${uid}`, `${digest}.sock`))
  }
  return found
}

// The first candidate that is certainly this user's socket, or "".
const socketPath = () => socketCandidates().find((path) => isAbsolute(path) && ownSocket(path)) ?? ""

// --- The block of a session ------------------------------------------------------------

// GET `path` on the Unix socket: { ok, body }. Bun (OpenCode 1.x, and 2.x built on Bun)
// has fetch with a `unix` option; Node's fetch has none, so there node:http is used.
const get = async (socket, path) => {
  if (typeof globalThis.Bun !== "undefined") {
    const response = await fetch("http://opencode-memoryd" + path, {
      unix: socket,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
    return { ok: response.ok, body: await response.text() }
  }
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { socketPath: socket, path, headers: { host: "opencode-memoryd" }, signal: AbortSignal.timeout(TIMEOUT_MS) },
      (res) => {
        const chunks = []
        res.on("data", (chunk) => chunks.push(chunk))
        res.on("end", () => {
          const ok = res.statusCode >= 200 && res.statusCode < 300
          resolve({ ok, body: Buffer.concat(chunks).toString("utf8") })
        })
        res.on("error", reject)
      },
    )
    req.on("error", reject)
    req.end()
  })
}

// The daemon's answer for a session's block (`where`: { session, directory, project,
// worktree, query }): its `result` object, or undefined without a socket or an answer.
const askContext = async (where) => {
  const socket = socketPath()
  if (!socket || !where.session) return undefined
  const params = new URLSearchParams({
    directory: where.directory ?? "",
    session: where.session,
    project: where.project ?? "",
    worktree: where.worktree ?? "",
    query: (where.query ?? "").slice(0, MAX_QUERY_CHARS),
  })
  const answer = await get(socket, "/v1/context?" + params)
  return answer.ok ? JSON.parse(answer.body)?.result : undefined
}

// Asks the daemon for a session's block: "" unless a whole, sealed block comes back.
const request = async (where) => {
  const text = (await askContext(where))?.text
  if (typeof text !== "string" || !text.trim()) return ""
  return sealed(text) ? text : ""
}

// Asks the daemon for a user message's recall part: "" unless a whole, sealed part comes
// back. `turn` is { session, message, text, directory, project }.
const requestRecall = async (turn) => {
  const socket = socketPath()
  if (!socket || !turn.message || !turn.text) return ""
  const params = new URLSearchParams({
    directory: turn.directory ?? "",
    session: turn.session,
    project: turn.project ?? "",
    message_id: turn.message,
    text: turn.text.slice(0, MAX_QUERY_CHARS),
  })
  const answer = await get(socket, "/v1/recall?" + params)
  if (!answer.ok) return ""
  const text = JSON.parse(answer.body)?.result?.text
  if (typeof text !== "string" || !text.trim()) return ""
  return sealed(text, RECALL_MARKER, RECALL_END_PREFIX) ? text : ""
}

// Tells the daemon that a recall part reached the message: the hash its closing line
// carries, so only the part that was added counts as given.
const confirmRecall = async (turn, part) => {
  const socket = socketPath()
  const last = part.trimEnd().split("\n").pop() ?? ""
  if (!socket || !last.startsWith(RECALL_END_PREFIX)) return
  const params = new URLSearchParams({
    session: turn.session,
    message_id: turn.message,
    digest: last.slice(RECALL_END_PREFIX.length, RECALL_END_PREFIX.length + 16),
  })
  await get(socket, "/v1/recall_given?" + params)
}

// `promise`, or `fallback` once `ms` have passed.
const bounded = (promise, ms, fallback) =>
  new Promise((resolve) => {
    const timer = setTimeout(() => resolve(fallback), ms)
    promise.then(
      (value) => (clearTimeout(timer), resolve(value)),
      () => (clearTimeout(timer), resolve(fallback)),
    )
  })

// A part id as OpenCode 1.x makes them ("prt_", 12 hex digits of ms * 4096 + a counter,
// 14 random base-62 characters; read in the shipped 1.18.33 binary), with the last counter
// of the current ms: a message's parts are read back in id order, so the part comes after
// the user's own text.
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
const partID = () => {
  const stamp = (BigInt(Date.now()) * 4096n + 4095n) & 0xffffffffffffn
  const tail = Array.from(randomBytes(14), (b) => BASE62[b % 62]).join("")
  return "prt_" + stamp.toString(16).padStart(12, "0") + tail
}

// Answers asked once per key (a session's block); a failure is kept as "" so the prompt
// stays the same. `ask()` gives the request's fields (it may be async).
const keptAnswers = (send, most = MAX_SESSIONS) => {
  const kept = new Map() // key -> Promise<string>
  return {
    get(key, ask) {
      if (!kept.has(key)) {
        if (kept.size >= most) kept.delete(kept.keys().next().value)
        kept.set(key, Promise.resolve().then(ask).then(send).catch(() => ""))
      }
      return kept.get(key)
    },
    forget(key) {
      kept.delete(key)
    },
  }
}
const sessionBlocks = () => keptAnswers(request)

const titleRequest = (first) => /title generator/i.test(first ?? "")

// --- Notes at tool calls ---------------------------------------------------------------

// The first line and the start of the last line of a tool call's note.
const ACTION_MARKER = "<!-- opencode-memoryd action -->"
const ACTION_END_PREFIX = "<!-- opencode-memoryd action end "
// The longest wait for a tool call's note once the tool is done, in milliseconds: the ask
// starts before the tool runs, so it is most often answered by then.
const ACTION_WAIT_MS = 500
const MAX_ERROR_CHARS = 4000
// Tools that read or edit one file (its path in `filePath`, or a patch's first file).
const FILE_TOOLS = new Set(["read", "edit", "write", "multiedit", "patch", "apply_patch"])

// What a tool call is about: { path } for a file tool, { command } for bash, else null
// (other tools and opencode-memoryd's own).
const actionOf = (tool, args) => {
  if (typeof tool !== "string" || tool.startsWith("memoryd")) return null
  if (tool === "bash") return typeof args?.command === "string" ? { command: args.command } : null
  if (!FILE_TOOLS.has(tool)) return null
  let path = args?.filePath ?? args?.path ?? args?.file_path
  if (typeof path !== "string") {
    path = /^\*\*\* (?:Add|Update|Delete) File: (.+)$/m.exec(String(args?.patchText ?? ""))?.[1]
  }
  return typeof path === "string" && path ? { path } : null
}

// Asks the daemon for a tool call's note: "" unless a whole, sealed note comes back.
// `call` is { session, directory, project, tool, id?, path?, command?, error? } (`id`: the
// tool call's, so its second note leaves out what its first one holds).
const requestAction = async (call) => {
  const socket = socketPath()
  if (!socket || !call?.session) return ""
  const params = new URLSearchParams({
    session: call.session,
    directory: call.directory ?? "",
    project: call.project ?? "",
    tool: call.tool ?? "",
    call: call.id ?? "",
    path: (call.path ?? "").slice(0, MAX_QUERY_CHARS),
    command: (call.command ?? "").slice(0, MAX_QUERY_CHARS),
    error: (call.error ?? "").slice(-MAX_ERROR_CHARS),
  })
  const answer = await get(socket, "/v1/action?" + params)
  if (!answer.ok) return ""
  const text = JSON.parse(answer.body)?.result?.text
  if (typeof text !== "string" || !text.trim()) return ""
  return sealed(text, ACTION_MARKER, ACTION_END_PREFIX) ? text : ""
}

// Tells the daemon that a note reached the tool's output: the hash its closing line
// carries, so only a note that was added counts as given (not one asked before a tool
// that then threw, nor one that came too late).
const confirmAction = async (session, note) => {
  const socket = socketPath()
  const last = note.trimEnd().split("\n").pop() ?? ""
  if (!socket || !session || !last.startsWith(ACTION_END_PREFIX)) return
  const params = new URLSearchParams({
    session,
    digest: last.slice(ACTION_END_PREFIX.length, ACTION_END_PREFIX.length + 16),
  })
  await get(socket, "/v1/action_given?" + params)
}

// `promise`, or `fallback` after `ms` milliseconds.
const within = (promise, ms, fallback) =>
  Promise.race([promise, new Promise((resolve) => setTimeout(() => resolve(fallback), ms).unref?.())])

// The notes of tool calls: `start` asks when a tool is about to run, `finish` gives the
// text to add to its result (the answer to `start`, and for a failed command the answer
// to a second ask with its error output), waiting at most ACTION_WAIT_MS; `added` tells
// the daemon that text reached the result, `drop` forgets a call that threw.
const actionNotes = () => {
  const started = new Map() // callID -> Promise<string>
  const ask = (call, callID) =>
    Promise.resolve(call).then((c) => c && { ...c, id: callID }).then(requestAction).catch(() => "")
  return {
    start(callID, call) {
      if (started.size >= MAX_SESSIONS) started.delete(started.keys().next().value)
      started.set(callID, ask(call, callID))
    },
    async finish(callID, call, error) {
      const first = started.get(callID) ?? (call ? ask(call, callID) : Promise.resolve(""))
      started.delete(callID)
      const again = call && error
        ? ask(Promise.resolve(call).then((c) => c && { ...c, error }), callID)
        : Promise.resolve("")
      const notes = await within(Promise.all([first, again]), ACTION_WAIT_MS, [])
      return notes.filter(Boolean).join("\n")
    },
    // awaited (at most ACTION_WAIT_MS), so the session's next tool call is not given
    // the same memories
    async added(session, text) {
      const told = text.split(ACTION_MARKER).filter((n) => n.trim())
        .map((note) => confirmAction(session, ACTION_MARKER + note).catch(() => {}))
      await within(Promise.all(told), ACTION_WAIT_MS, [])
    },
    drop(callID) {
      started.delete(callID)
    },
  }
}

// Whether a bash result is a failed command (a non-zero exit code in its metadata).
const failedCommand = (tool, metadata) =>
  tool === "bash" && typeof metadata?.exit === "number" && metadata.exit !== 0

// The text of a 2.x tool result's `content`: a string or [{ type: "text", text }, ...].
const contentText = (content) =>
  typeof content === "string"
    ? content
    : content.filter((part) => part?.type === "text").map((part) => String(part.text ?? "")).join("\n")

// --- Toasts (OpenCode 1.x) -------------------------------------------------------------

// The agent's memory tool, as OpenCode names an MCP server's tool: <server>_memory.
const MEMORY_TOOL = /^memoryd[\w-]*_memory$/

// What the daemon's answer for a session's block says for the toasts: { entries, toasts }
// (toasts false when `[context] toasts` is off, or without an answer).
const requestToastInfo = async (where) => {
  const result = await askContext(where)
  const entries = Number.isInteger(result?.entries) ? result.entries : 0
  return { entries, toasts: result?.toasts === true }
}

// A toast in OpenCode's terminal UI (`client.tui.showToast`; under `opencode run` the
// server publishes it on its bus and nothing shows); a failure is ignored.
const showToast = async (client, message) => {
  try {
    await client?.tui?.showToast?.({ body: { title: "opencode-memoryd", message, variant: "info" } })
  } catch {}
}

// The toasts of a session: `opened` once per session and OpenCode process (the number of
// notes in its block), `saved` when the agent's memory tool stored a note; both only when
// the daemon's answer for the session's block says toasts are on. `where(sessionID)()`
// gives the block request's fields (the same as the block's, so the daemon answers from
// what it keeps).
const sessionToasts = (client, where) => {
  const info = keptAnswers(requestToastInfo)
  const shown = new Set()
  return {
    async opened(sessionID) {
      if (shown.has(sessionID)) return
      if (shown.size >= MAX_SESSIONS) shown.delete(shown.values().next().value)
      shown.add(sessionID)
      const { entries, toasts } = (await info.get(sessionID, where(sessionID))) || {}
      if (toasts && entries > 0) {
        await showToast(client, `memory: ${entries} note${entries === 1 ? "" : "s"} for this project`)
      }
    },
    async saved(sessionID, args, text) {
      if (args?.mode !== "add") return
      const result = JSON.parse(text)
      if (result?.success !== true || !["added", "pending"].includes(result?.status)) return
      if (!((await info.get(sessionID, where(sessionID))) || {}).toasts) return
      await showToast(client, result.status === "pending"
        ? "memory: noted for you, waiting for your confirmation"
        : "memory: saved a note")
    },
  }
}

// --- OpenCode 1.x ----------------------------------------------------------------------

// The human text of a user message's parts.
const humanText = (parts) =>
  (Array.isArray(parts) ? parts : [])
    .filter((part) => part?.type === "text" && !part.synthetic && !part.ignored)
    .map((part) => String(part.text ?? ""))
    .join("\n")
    .trim()

const server = async ({ project, directory, worktree, client } = {}) => {
  const queries = new Map() // sessionID -> text of the session's first user message
  const blocks = sessionBlocks()
  const notes = actionNotes()
  const call = (input, about) => ({
    ...about,
    session: input.sessionID,
    tool: input.tool,
    directory,
    project: project?.id,
  })
  const where = (sessionID) => () => ({
    session: sessionID,
    directory,
    project: project?.id,
    worktree,
    query: queries.get(sessionID),
  })
  const toasts = sessionToasts(client, where)

  return {
    // Runs before a user message is saved: keep the first user message of each session as
    // the query for the block's "relevant to the task" part, then add the message's recall
    // part to it (asked after the session's block, so the part leaves out what the block
    // holds).
    "chat.message": async (input, output) => {
      try {
        const sessionID = input?.sessionID
        if (!sessionID) return
        const text = humanText(output?.parts).slice(0, MAX_QUERY_CHARS)
        if (!queries.has(sessionID)) {
          if (queries.size >= MAX_SESSIONS) queries.delete(queries.keys().next().value)
          queries.set(sessionID, text)
        }
        const message = output?.message?.id ?? input?.messageID
        if (typeof message !== "string" || !message || !text || !Array.isArray(output?.parts)) return
        const turn = { session: sessionID, message, text, directory, project: project?.id }
        const asked = blocks.get(sessionID, where(sessionID)).then(() => requestRecall(turn))
        const part = await bounded(asked, RECALL_WAIT_MS, "")
        if (!part) return
        output.parts.push({ id: partID(), sessionID, messageID: message, type: "text", text: part, synthetic: true })
        confirmRecall(turn, part).catch(() => {})
      } catch {}
    },

    // Runs for every model request. The title request of a new session also comes here
    // (its system prompt is the title generator's); it gets nothing.
    "experimental.chat.system.transform": async (input, output) => {
      try {
        const sessionID = input?.sessionID
        if (!sessionID || !Array.isArray(output?.system)) return
        if (titleRequest(output.system[0])) return
        const text = await blocks.get(sessionID, where(sessionID))
        if (text) output.system.push(text)
      } catch {}
    },

    event: async ({ event } = {}) => {
      try {
        // a user message of a session: its toast, once per session
        const info = event?.type === "message.updated" ? event.properties?.info : undefined
        if (info?.role === "user" && info.sessionID) {
          toasts.opened(info.sessionID).catch(() => {})
          // the daemon builds its index of the memories' words for the tool calls to come
          requestAction(call({ sessionID: info.sessionID, tool: "" }, {})).catch(() => {})
        }
        if (event?.type !== "session.deleted") return
        const sessionID = event.properties?.info?.id
        queries.delete(sessionID)
        blocks.forget(sessionID)
      } catch {}
    },

    // Before a tool reads or edits a file or runs a command: ask for the memories about
    // it now, so that the answer is most often there when the tool is done.
    "tool.execute.before": async (input, output) => {
      try {
        const about = actionOf(input?.tool, output?.args)
        if (!about || !input?.sessionID || !input?.callID) return
        notes.start(input.callID, call(input, about))
      } catch {}
    },

    // After it: the note (and, for a failed command, the one about its error) goes at the
    // end of the tool's output, which the model reads in the next step, and the daemon is
    // told so. What the tool did is unchanged; a tool that failed with an error (no result,
    // this hook never runs) gets nothing, and its note counts as not given.
    "tool.execute.after": async (input, output) => {
      try {
        if (!input?.sessionID) return
        if (MEMORY_TOOL.test(input.tool ?? "")) {
          // an MCP tool's result here: { content: [{ type: "text", text }], isError }
          if (output?.isError || !Array.isArray(output?.content)) return
          await toasts.saved(input.sessionID, input.args, contentText(output.content))
          return
        }
        if (typeof output?.output !== "string") return
        const about = actionOf(input.tool, input.args)
        const error = failedCommand(input.tool, output.metadata) ? output.output : ""
        const text = await notes.finish(input.callID, about && call(input, about), error)
        if (!text) return
        output.output = `${output.output}\n\n${text}`
        await notes.added(input.sessionID, text)
      } catch {}
    },
  }
}

// --- OpenCode 2.x ----------------------------------------------------------------------

// The text of the first user message among the request's messages (LLM messages:
// { role, content: [{ type: "text", text }, ...] }).
const firstUserText = (messages) => {
  const first = (Array.isArray(messages) ? messages : []).find((m) => m?.role === "user")
  const content = Array.isArray(first?.content) ? first.content : []
  return content
    .filter((part) => part?.type === "text" && typeof part.text === "string")
    .map((part) => part.text)
    .join("\n")
    .trim()
}

// No recall part in 2.x: its `prompt` hook sees each new user message, but can only change
// the user's own text (packages/schema/src/prompt-input.ts), not add a synthetic part.
const setup = async (ctx) => {
  const blocks = sessionBlocks()
  // The session's folder and project: `ctx.session.get` gives Session.Info
  // ({ projectID, location: { directory }, ... }; anomalyco/opencode 06f9d1a6
  // packages/schema/src/session.ts), possibly wrapped as { data }.
  const where = (event) => async () => {
    let info = {}
    try {
      // bounded: a request never waits on the plugin longer than the daemon's timeout
      const late = new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS))
      const got = await Promise.race([ctx.session.get({ sessionID: event.sessionID }), late])
      info = got?.data ?? got ?? {}
    } catch {}
    return {
      session: event.sessionID,
      directory: info.location?.directory ?? info.directory,
      project: info.projectID,
      query: firstUserText(event.messages),
    }
  }
  // Runs before each model request of a session's agent loop. A request that carries a
  // `kind` other than "primary" (title, compaction, generate; "auxiliary requests share the
  // Session's hook identity", packages/plugin/src/promise/session.ts) gets nothing.
  await ctx.session.hook("context", async (event) => {
    try {
      const sessionID = event?.sessionID
      if (typeof sessionID !== "string" || !sessionID || !Array.isArray(event.system)) return
      if (event.kind !== undefined && event.kind !== "primary") return
      if (titleRequest(event.system[0]?.text)) return
      const text = await blocks.get(sessionID, where(event))
      if (text) event.system.push({ type: "text", text })
    } catch {}
  })
  await toolNotes(ctx)
}

// 2.x notes at tool calls: `ctx.tool.hook("execute.before" | "execute.after", ...)`, whose
// events carry `tool`, `sessionID`, `id` (the call id) and `input`; the after event has
// `status` and, when "completed", a `result` ({ output?, content?, metadata? }) the hook may
// replace (anomalyco/opencode 196e4612 packages/plugin/src/promise/tool.ts; 0f131b3e
// packages/schema/src/tool.ts). The note is added to `content` (a string or text parts)
// only: a result without `content` is left as it is. A failed command is one whose
// metadata has a non-zero `exit`, as in 1.18.33.
const toolNotes = async (ctx) => {
  if (typeof ctx?.tool?.hook !== "function") return
  const notes = actionNotes()
  // the session's folder and project, as the block's request has them (see setup)
  const place = async (sessionID) => {
    let info = {}
    try {
      const late = new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS))
      const got = await Promise.race([ctx.session.get({ sessionID }), late])
      info = got?.data ?? got ?? {}
    } catch {}
    return { directory: info.location?.directory ?? info.directory, project: info.projectID }
  }
  const places = new Map() // sessionID -> Promise<{ directory, project }>
  const call = (event, about) => {
    if (!places.has(event.sessionID)) {
      if (places.size >= MAX_SESSIONS) places.delete(places.keys().next().value)
      places.set(event.sessionID, place(event.sessionID))
    }
    return places.get(event.sessionID).then((at) => ({ ...about, ...at, session: event.sessionID, tool: event.tool }))
  }
  await ctx.tool.hook("execute.before", async (event) => {
    try {
      const about = actionOf(event?.tool, event?.input)
      if (!about || typeof event.sessionID !== "string" || !event.id) return
      notes.start(event.id, call(event, about))
    } catch {}
  })
  await ctx.tool.hook("execute.after", async (event) => {
    try {
      const content = event?.status === "completed" ? event.result?.content : undefined
      if (typeof content !== "string" && !Array.isArray(content)) {
        notes.drop(event?.id) // a tool that failed with an error: its note is not given
        return
      }
      const about = actionOf(event.tool, event.input)
      const error = failedCommand(event.tool, event.result.metadata) ? contentText(content) : ""
      const text = await notes.finish(event.id, about && call(event, about), error)
      if (!text) return
      const more = typeof content === "string" ? `${content}\n\n${text}` : [...content, { type: "text", text }]
      event.result = { ...event.result, content: more }
      await notes.added(event.sessionID, text)
    } catch {}
  })
}

export default { id: APP, server, setup }

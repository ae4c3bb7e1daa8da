// opencode-memoryd plugin. Written by `opencode-memoryd install-opencode`, which overwrites
// it; `opencode-memoryd uninstall-opencode` removes it.
//
// Once per session it asks the opencode-memoryd daemon, over the daemon's Unix socket, for
// a block of memories and adds that same text to the system prompt of every model request
// of the session. The text never changes within a session, so the provider's cached prompt
// prefix stays valid. When the daemon is down, slow or answers an error, the block is empty
// and OpenCode runs as if this plugin were not installed: no error is thrown or printed.
// Nothing is sent unless the socket is this user's (see ownSocket).

import { lstatSync } from "node:fs"
import { dirname } from "node:path"
import { createHash } from "node:crypto"

const SOCKET = process.env.OPENCODE_MEMORYD_SOCKET || $socket
// The first line of every injected block, so that opencode-memoryd can tell its own text
// apart when it reads the session back.
const MARKER = "<!-- opencode-memoryd context -->"
// The start of the block's last line, which ends with a hash of the lines between.
const END_PREFIX = "<!-- opencode-memoryd context end "
const TIMEOUT_MS = 1500
const MAX_QUERY_CHARS = 2000

// A block is used only whole: the marker first, and a closing line carrying the first 16 hex
// digits of the SHA-256 of the lines between (anything else, e.g. a cut answer, gives none).
const sealed = (text) => {
  const lines = text.split("\n")
  while (lines.length && lines[lines.length - 1] === "") lines.pop()
  if (lines.length < 3 || lines[0] !== MARKER) return false
  const body = lines.slice(1, -1).join("\n")
  const digest = createHash("sha256").update(body, "utf8").digest("hex").slice(0, 16)
  return lines[lines.length - 1] === END_PREFIX + digest + " -->"
}

// Whether the socket is certainly this user's: its folder a real folder (not a link) owned
// by this user and closed to others (the daemon makes it 0700), the socket file in it this
// user's. Another user who made the folder first (a shared XDG_RUNTIME_DIR or TMPDIR)
// would otherwise serve the block and read each session's first message.
const ownSocket = () => {
  if (typeof process.getuid !== "function") return false
  const uid = process.getuid()
  const folder = lstatSync(dirname(SOCKET))
  if (folder.isSymbolicLink() || !folder.isDirectory() || folder.uid !== uid) return false
  if ((folder.mode & 0o077) !== 0) return false
  const file = lstatSync(SOCKET)
  return file.isSocket() && file.uid === uid
}

export const OpencodeMemoryd = async ({ project, directory, worktree }) => {
  const queries = new Map() // sessionID -> text of the session's first user message
  const blocks = new Map() // sessionID -> Promise<string>: the session's block, or ""

  const request = async (sessionID) => {
    if (!ownSocket()) return ""
    const params = new URLSearchParams({
      directory: directory ?? "",
      session: sessionID,
      project: project?.id ?? "",
      worktree: worktree ?? "",
      query: queries.get(sessionID) ?? "",
    })
    const response = await fetch("http://opencode-memoryd/v1/context?" + params, {
      unix: SOCKET,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
    if (!response.ok) return ""
    const text = (await response.json())?.result?.text
    if (typeof text !== "string" || !text.trim()) return ""
    return sealed(text) ? text : ""
  }

  // Asked once per session; a failure is remembered as "" so the prompt stays the same.
  const block = (sessionID) => {
    if (!blocks.has(sessionID)) blocks.set(sessionID, request(sessionID).catch(() => ""))
    return blocks.get(sessionID)
  }

  return {
    // Runs before the first model request of a turn: keep the first user message of each
    // session as the query for the block's "relevant to the task" part.
    "chat.message": async (input, output) => {
      try {
        const sessionID = input?.sessionID
        if (!sessionID || queries.has(sessionID)) return
        const text = (output?.parts ?? [])
          .filter((part) => part?.type === "text" && !part.synthetic && !part.ignored)
          .map((part) => String(part.text ?? ""))
          .join("\n")
          .trim()
        queries.set(sessionID, text.slice(0, MAX_QUERY_CHARS))
      } catch {}
    },

    // Runs for every model request. The title request of a new session also comes here
    // (its system prompt is the title generator's); it gets nothing.
    "experimental.chat.system.transform": async (input, output) => {
      try {
        const sessionID = input?.sessionID
        if (!sessionID || !Array.isArray(output?.system)) return
        if (/title generator/i.test(output.system[0] ?? "")) return
        const text = await block(sessionID)
        if (text) output.system.push(text)
      } catch {}
    },

    event: async ({ event }) => {
      try {
        if (event?.type !== "session.deleted") return
        const sessionID = event.properties?.info?.id
        queries.delete(sessionID)
        blocks.delete(sessionID)
      } catch {}
    },
  }
}

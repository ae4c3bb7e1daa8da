// Test stand-in: pushes one fixed block into the system prompt of every model request of a
// session, except OpenCode's title-generation request (whose system prompt names the title
// generator). Hook shape: OpenCode 1.18.33 "experimental.chat.system.transform".
// Every export of a plugin module must be a plugin function: OpenCode 1.18.33 refuses the
// whole file ("Plugin export is not a function") when one is not.
const FIXED_BLOCK = "<sandbox-memory>\nThe project uses pnpm, never npm.\n</sandbox-memory>"

export const FixedBlock = async () => ({
  "experimental.chat.system.transform": async (input, output) => {
    if (!input.sessionID || /title generator/i.test(output.system[0] ?? "")) return
    output.system.push(FIXED_BLOCK)
  },
})

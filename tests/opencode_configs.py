"""Global OpenCode configs as people write them, for the JSONC and install-opencode tests."""

from __future__ import annotations

EXE = "/opt/memoryd/bin/opencode-memoryd"
PATH = ("mcp", "memoryd")
ENTRY = {"type": "local", "command": [EXE, "mcp"], "enabled": True}

COMMENTED = """\
// OpenCode global config
{
  "$schema": "https://opencode.ai/config.json", // the schema
  /* the theme
     for every project */
  "theme": "tokyonight",
  "model": "anthropic/claude-sonnet-4" /* before the comma */ ,
  "instructions": ["~/notes/*.md", "http://example.test/a//b", "/* not a comment */"],
  "provider": {
    "local": {
      "options": { "baseURL": "http://127.0.0.1:8080/v1", "escaped": "a\\"b\\\\" },
    },
  },
  // the end
}
"""

EXISTING_MCP = """\
{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    // search the web
    "web": {
      "type": "remote",
      "url": "https://example.test/mcp"
    } // no trailing comma here
  },
  "theme": "system"
}
"""

EXISTING_MCP_TRAILING = """\
{
  "mcp": {
    "web": {"type": "remote", "url": "https://example.test/mcp"},
    "files": {"type": "local", "command": ["files-mcp"]},
  },
}
"""

CRLF = '{\r\n  "theme": "dark",\r\n  "autoupdate": false\r\n}\r\n'
TABS = '{\n\t"theme": "dark",\n\t"mcp": {\n\t\t"x": {"type": "local", "command": ["x"]}\n\t}\n}\n'
FOUR = '{\n    "theme": "dark"\n}'
ONE_LINE = '{"theme":"dark","autoupdate":false}'
UNICODE = '{\n  "username": "Zoë ✓",  // 名前\n  "share": "manual"\n}\n'

ROUND_TRIPS = {
    "commented": COMMENTED,
    "existing-mcp": EXISTING_MCP,
    "existing-mcp-trailing-commas": EXISTING_MCP_TRAILING,
    "crlf": CRLF,
    "tabs": TABS,
    "four-spaces-no-final-newline": FOUR,
    "one-line": ONE_LINE,
    "unicode": UNICODE,
}

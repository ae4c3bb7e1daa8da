"""Integration with the host: service files (systemd, launchd) and OpenCode (plugin, MCP)."""

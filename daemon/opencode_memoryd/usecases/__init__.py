"""The use cases, each implemented once and called alike by the CLI, the daemon's control
server and the MCP server: maintain, list, search, show, status, dream (run, recover, undo),
add, forget, profile, and the user identity's migration.
"""

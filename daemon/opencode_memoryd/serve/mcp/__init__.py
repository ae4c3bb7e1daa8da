"""The MCP side: the ``memory`` tool, the server the daemon hosts, the stdio relay OpenCode
starts, and the stdio server kept for a daemon that hosts no MCP socket.
"""

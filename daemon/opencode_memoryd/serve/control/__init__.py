"""The control socket: its protocol, HTTP server and handler, its one client, and the
check of who serves a socket.
"""

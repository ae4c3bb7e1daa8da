"""The long-running side: the daemon (watching, debounce, jobs) and its control socket server and
client.
"""

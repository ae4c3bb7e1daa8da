"""The command line: one small module per command group; the only place that renders output and
picks exit codes.
"""

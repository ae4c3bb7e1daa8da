"""The daemon's runtime: its collaborators (the command host, the source tracker, the worker,
the timed work) sharing one state object, and what they run on (signals, readiness,
priority, alerts, the web page's host).
"""

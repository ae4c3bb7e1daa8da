"""The local web page and its REST API: served by the daemon on a loopback port when
``[web] enabled`` is true (Starlette on uvicorn, in a thread of the daemon's own)."""

"""The hub's front: a buffering HTTP/1.1 reverse proxy in front of gunicorn (``python -m front``).

gunicorn's threads are few (workers × threads) and a thread reading a request belongs to that
request's client until it is complete: a few clients that never finish their headers, or declare a
body and send part of it, would own them all. The front reads every request — headers and body —
on one asyncio event loop, where a waiting client costs a few kilobytes instead of a thread, under
time limits (headers, body, idle keep-alive) and the endpoint's byte budget, and hands gunicorn only
complete requests over a private unix socket. Requests it refuses itself (malformed, too large, too
slow) are answered in the hub's JSON envelope under the API prefixes. ``server.py`` is the proxy,
``launcher.py`` starts gunicorn behind it (what ``make demo`` runs) and starts the whole topology
for tests and chaos runs.
"""

"""WSGI entry point (gunicorn bailing.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

from bailing import tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bailing.settings")
# Tracing (OTEL_* set): the instrumentation goes in before the middleware chain is built; each
# gunicorn worker starts its own tracer provider after the fork (bailing/gunicorn.conf.py).
tracing.instrument()
application = get_wsgi_application()

# The URLconf, and with it every view module, imported here: under gunicorn (preload_app) that is
# once in the master before the workers fork, so a worker — a new one, or one recycled after
# max_requests — is ready at once instead of importing them again on its first request.
get_resolver().url_patterns  # noqa: B018
import mcp_server.protocol  # noqa: E402, F401 -- the one module a view imports on its first request

"""WSGI entry point (gunicorn bailing.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

from bailing import tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bailing.settings")
# Tracing (OTEL_* set): the instrumentation goes in before the middleware chain is built; each
# gunicorn worker starts its own tracer provider after the fork (bailing/gunicorn.conf.py).
tracing.instrument()
application = get_wsgi_application()

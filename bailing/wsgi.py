"""WSGI entry point (gunicorn bailing.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bailing.settings")
application = get_wsgi_application()

"""A ``DATABASE_URL`` for a Django connection's settings, so a process the hub starts (a benchmark's
gunicorn, a test's live hub) uses exactly the database its caller is connected to."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote


def database_url(settings_dict: Mapping) -> str:
    """The libpq URL of ``settings_dict`` (e.g. ``connection.settings_dict``; the test database under
    pytest). The embedded server's socket directory becomes the ``host`` option."""
    host = settings_dict.get("HOST") or settings_dict.get("OPTIONS", {}).get("host", "")
    user = quote(settings_dict.get("USER") or "postgres", safe="")
    password = settings_dict.get("PASSWORD") or ""
    credentials = f"{user}:{quote(password, safe='')}" if password else user
    name = quote(settings_dict["NAME"], safe="")
    if not host or host.startswith("/"):
        return f"postgres://{credentials}@/{name}" + (f"?host={quote(host, safe='/')}" if host else "")
    return f"postgres://{credentials}@{host}:{settings_dict.get('PORT') or 5432}/{name}"

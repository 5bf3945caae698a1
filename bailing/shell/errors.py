"""Error pages of the whole site (``handler400/403/404/500`` of the root URLconf, and
``CSRF_FAILURE_VIEW``). Each console error page leads back: to the dashboard when signed in, to the
sign-in page when not (``console/_way_back.html``); the static 500 and 503 pages to the console.

Under the API prefixes every error is the flat JSON envelope (``bailing.api.middleware`` turns any
HTML error there into JSON as well); everywhere else the console's own styled page answers, never
Django's debug or plain pages. The 500 and 503 pages are static: they must render even when the
database (which the navigation and the signed-in user need) is what failed.

Django calls the 500 handler for every exception a view or a middleware let through (sessions and
the signed-in user included), while that exception is being handled: when it shows the database
unreachable (docs/protocol.md "Database outages") the answer is 503 ``service_unavailable`` with
``Retry-After`` instead — the envelope under the API prefixes, the styled page elsewhere — logged as
one warning line, without the traceback Django would log for a 500.
"""

from __future__ import annotations

import sys

from django.http import HttpResponse, HttpResponseServerError
from django.template import loader
from django.utils.cache import add_never_cache_headers

from bailing.api.exception_handler import (
    api_error_for_status,
    api_error_response,
    database_unavailable_error,
)
from bailing.api.surfaces import on_agent_surface
from bailing.db.outage import database_unavailable, log_database_unavailable, mark_logged
from bailing.ui.pages import error_page

_TEXTS = {
    400: ("Bad request", "The request could not be understood."),
    403: ("Not allowed", "You do not have permission to open this page."),
    404: ("Page not found", "There is no console page at this address."),
}


def _page(request, status: int):
    if on_agent_surface(request.path):
        return api_error_response(api_error_for_status(status), status=status)
    title, detail = _TEXTS[status]
    return error_page(request, status=status, title=title, detail=detail)


def csrf_failure(request, reason=""):
    """``CSRF_FAILURE_VIEW``: a console form sent without its CSRF token (most often a page left open
    across a sign-out, or a form posted from another site) is the styled 403 with a way back, not
    Django's bare page. ``reason`` is Django's text for the log; the page never shows it."""
    return error_page(
        request,
        status=403,
        title="Form not accepted",
        detail=(
            "This form could not be checked as coming from this console (it may have been open for too "
            "long, or sent from another site), so nothing was changed. Reload the page and try again."
        ),
        code="csrf_failed",
    )


def bad_request(request, exception=None):
    return _page(request, 400)


def permission_denied(request, exception=None):
    return _page(request, 403)


def page_not_found(request, exception=None):
    return _page(request, 404)


def _database_unavailable(request) -> HttpResponse:
    error = database_unavailable_error()
    if on_agent_surface(request.path):
        response = api_error_response(error)
        response["Cache-Control"] = "no-store"
        return response
    response = HttpResponse(loader.get_template("503.html").render(), status=503)
    for name, value in error.headers.items():
        response[name] = value
    add_never_cache_headers(response)
    return response


def server_error(request):
    outage = database_unavailable(sys.exc_info()[1])
    if outage is not None:
        log_database_unavailable(outage)
        response = _database_unavailable(request)
        mark_logged(response)
        return response
    if on_agent_surface(request.path):
        return api_error_response(api_error_for_status(500), status=500)
    return HttpResponseServerError(loader.get_template("500.html").render())

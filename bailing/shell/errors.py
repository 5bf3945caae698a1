"""Error pages of the whole site (``handler400/403/404/500`` of the root URLconf).

Under the API prefixes every error is the flat JSON envelope (``bailing.api.middleware`` turns any
HTML error there into JSON as well); everywhere else the console's own styled page answers, never
Django's debug or plain pages. The 500 page is static: it must render even when the database (which
the navigation and the signed-in user need) is what failed.
"""

from __future__ import annotations

from django.http import HttpResponseServerError
from django.template import loader

from bailing.api.exception_handler import api_error_for_status, api_error_response
from bailing.api.middleware import on_agent_surface
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


def bad_request(request, exception=None):
    return _page(request, 400)


def permission_denied(request, exception=None):
    return _page(request, 403)


def page_not_found(request, exception=None):
    return _page(request, 404)


def server_error(request):
    if on_agent_surface(request.path):
        return api_error_response(api_error_for_status(500), status=500)
    return HttpResponseServerError(loader.get_template("500.html").render())

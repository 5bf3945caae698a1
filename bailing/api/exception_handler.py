"""One exception handler renders every API error in the flat envelope.

DRF's own exceptions are mapped onto stable codes; a database that cannot be reached is 503
``service_unavailable`` with ``Retry-After`` and one warning line (docs/protocol.md "Database
outages"); anything else unexpected becomes a bare 500 ``internal_error`` whose log line names the
exception type only (no body, credential or SQL).
:func:`api_error_response` renders the same envelope for the few errors decided before DRF runs
(a chunked body over budget) or after it (Django's own HTML error pages under the agent prefixes).
"""

from __future__ import annotations

import json
import logging

from django.http import Http404, HttpResponse
from rest_framework import exceptions as drf
from rest_framework.response import Response

from bailing.api import errors
from bailing.api.serializers import first_error_path
from bailing.db.outage import (
    DATABASE_RETRY_AFTER_SECONDS,
    database_unavailable,
    log_database_unavailable,
    mark_logged,
)

logger = logging.getLogger("bailing.api")

# Django answers a few requests itself, before or around the view (a disallowed Host header is a
# 400, an unknown path a 404...). Under the agent prefixes those become the envelope of the same
# status; a status without its own code keeps the status and says ``invalid_request`` (4xx) or
# ``internal_error`` (5xx).
_STATUS_ERRORS: dict[int, type[errors.ApiError]] = {
    400: errors.InvalidRequest,
    401: errors.Unauthorized,
    403: errors.Forbidden,
    404: errors.NotFound,
    405: errors.MethodNotAllowed,
    415: errors.UnsupportedMediaType,
}


def _from_drf(exc: Exception) -> errors.ApiError | None:
    if isinstance(exc, errors.ApiError):
        return exc
    if isinstance(exc, drf.UnsupportedMediaType):
        return errors.UnsupportedMediaType()
    if isinstance(exc, drf.ParseError):
        return errors.InvalidRequest("The request body is not valid JSON.")
    if isinstance(exc, drf.ValidationError):
        return errors.InvalidRequest(field=first_error_path(exc.detail))
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        return errors.Unauthorized()
    if isinstance(exc, drf.MethodNotAllowed):
        return errors.MethodNotAllowed()
    if isinstance(exc, drf.NotFound | Http404):
        return errors.NotFound()
    if isinstance(exc, drf.PermissionDenied):
        return errors.Forbidden()
    return None


def database_unavailable_error() -> errors.ServiceUnavailable:
    return errors.ServiceUnavailable(retry_after=DATABASE_RETRY_AFTER_SECONDS)


def api_exception_handler(exc: Exception, context: dict) -> Response:
    api_exc = _from_drf(exc)
    outage = None
    if api_exc is None:
        outage = database_unavailable(exc)
        if outage is not None:
            log_database_unavailable(outage)
            api_exc = database_unavailable_error()
        else:
            view = context.get("view")
            logger.error("unhandled %s in %s", type(exc).__name__, type(view).__name__ if view else "view")
            api_exc = errors.InternalError()
    response = Response(api_exc.payload(), status=api_exc.http_status)
    for name, value in api_exc.headers.items():
        response[name] = value
    if outage is not None:
        mark_logged(response)  # the warning above is the whole record of it
    return response


def api_error_response(exc: errors.ApiError, *, status: int | None = None) -> HttpResponse:
    """``exc`` in the flat envelope as a plain Django response (outside DRF's request cycle).

    Serialised here rather than by the API renderer, so that even a failing renderer (the cause of
    a 500 this replaces) cannot break the error response.
    """
    body = json.dumps(exc.payload(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    response = HttpResponse(body, status=status or exc.http_status, content_type="application/json")
    for name, value in exc.headers.items():
        response[name] = value
    return response


def api_error_for_status(status: int) -> errors.ApiError:
    """The envelope for a non-JSON error response Django produced with ``status``."""
    if status == 503:
        return database_unavailable_error()
    if status >= 500:
        return errors.InternalError()
    return _STATUS_ERRORS.get(status, errors.InvalidRequest)()

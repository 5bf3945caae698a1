"""One exception handler renders every API error in the flat envelope.

DRF's own exceptions are mapped onto stable codes; anything unexpected becomes a bare 500
``internal_error`` whose log line names the exception type only (no body, credential or SQL).
"""

from __future__ import annotations

import logging

from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework.response import Response

from bailing.api import errors
from bailing.api.serializers import first_error_path

logger = logging.getLogger("bailing.api")


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


def api_exception_handler(exc: Exception, context: dict) -> Response:
    api_exc = _from_drf(exc)
    if api_exc is None:
        view = context.get("view")
        logger.error("unhandled %s in %s", type(exc).__name__, type(view).__name__ if view else "view")
        api_exc = errors.InternalError()
    response = Response(api_exc.payload(), status=api_exc.http_status)
    for name, value in api_exc.headers.items():
        response[name] = value
    return response

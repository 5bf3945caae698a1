"""Headers every agent/business response carries, JSON errors there, and chunked request bodies.

"There" is under the API prefixes the apps register (``bailing.api.surfaces``). ``Cache-Control:
no-store`` goes on every response there, errors included; a token endpoint adds ``Pragma: no-cache``.
Django's own error pages (404, 500, the 400 of a disallowed Host header...) are HTML, so under those
prefixes they become the flat JSON envelope.

A body sent with ``Transfer-Encoding: chunked`` has no ``Content-Length``; Django and DRF would read
it as empty, so a request the agent meant would be judged as ``{}`` and an oversized one would never
be measured. This middleware reads such a body itself, under the view's byte budget, before the view
runs: past the budget it stops reading and answers 413 with ``observed_bytes``; otherwise it hands
the view the body with its now-known length. It relies on the server ending the de-chunked stream
(``wsgi.input_terminated``, as gunicorn does); a server that cannot is answered 400. A body whose
declared ``Content-Length`` is over the view's budget is refused (413) before any of it is read.
"""

from __future__ import annotations

import io

from django.core.handlers.wsgi import LimitedStream

from bailing.api.errors import InvalidRequest, RequestBodyTooLarge
from bailing.api.exception_handler import api_error_for_status, api_error_response
from bailing.api.parsers import body_budget, declared_length, read_budgeted
from bailing.api.surfaces import on_agent_surface, pragma_no_cache


def _chunked_body(request) -> bool:
    meta = request.META
    return not meta.get("CONTENT_LENGTH") and "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower()


class AgentSurfaceMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        path = request.path
        if on_agent_surface(path):
            content_type = response.get("Content-Type", "")
            if response.status_code >= 400 and not content_type.startswith("application/json"):
                allow = response.get("Allow")
                status = response.status_code
                if status > 500 and status != 503:
                    status = 500  # 503 stays service_unavailable; any other 5xx is internal_error
                response = api_error_response(api_error_for_status(status), status=status)
                if allow:
                    response["Allow"] = allow
            if response.has_header("Allow"):
                # DRF lists OPTIONS on every view, but these surfaces answer it 405 (no metadata).
                methods = [m.strip() for m in response["Allow"].split(",")]
                response["Allow"] = ", ".join(m for m in methods if m and m != "OPTIONS")
            response["Cache-Control"] = "no-store"
            if pragma_no_cache(path):
                response["Pragma"] = "no-cache"
        return response

    def process_view(self, request, view_func, view_args, view_kwargs):
        if not on_agent_surface(request.path):
            return None
        budget = body_budget(getattr(view_func, "view_class", None))
        declared = declared_length(request.META)
        if declared is not None and declared > budget:
            # Refused on the declaration, before one byte of the body is read.
            return api_error_response(RequestBodyTooLarge(max_bytes=budget, observed_bytes=declared))
        if not _chunked_body(request):
            return None
        if not request.META.get("wsgi.input_terminated"):
            return api_error_response(InvalidRequest("The request body needs a Content-Length."))
        try:
            raw = read_budgeted(request.META["wsgi.input"], budget)
        except (RequestBodyTooLarge, InvalidRequest) as exc:  # over budget; broken framing, client gone
            return api_error_response(exc)
        request._stream = LimitedStream(io.BytesIO(raw), len(raw))
        request.META["CONTENT_LENGTH"] = str(len(raw))
        return None

"""Headers every agent/business response carries, and JSON for unknown routes there.

``Cache-Control: no-store`` goes on every ``/agent-api/`` and ``/agent-auth/`` response, errors
included; the token endpoint adds ``Pragma: no-cache``. Django's own 404/500 pages are HTML, so
those two prefixes get the flat JSON envelope instead.
"""

from __future__ import annotations

import json

from django.http import HttpResponse

AGENT_PREFIXES = ("/agent-api/", "/agent-auth/", "/kb/")
TOKEN_PATH = "/agent-auth/v1/token"


def json_error(code: str, message: str, status: int) -> HttpResponse:
    body = json.dumps({"error": code, "message": message}, separators=(",", ":"))
    return HttpResponse(body, status=status, content_type="application/json")


class AgentSurfaceMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        path = request.path
        if path.startswith(AGENT_PREFIXES):
            content_type = response.get("Content-Type", "")
            if not content_type.startswith("application/json"):
                if response.status_code == 404:
                    response = json_error("not_found", "Not found.", 404)
                elif response.status_code >= 500:
                    response = json_error("internal_error", "Internal error.", 500)
            response["Cache-Control"] = "no-store"
            if path.rstrip("/") == TOKEN_PATH:
                response["Pragma"] = "no-cache"
        return response

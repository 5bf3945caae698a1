"""The API docs page (``/api/docs/``): Swagger UI served from the hub's own static files.

It is the hub's Content-Security-Policy with one addition: Swagger UI's stylesheet draws its icons as
``data:`` SVG images, so this page allows ``img-src data:`` too. Scripts and styles stay ``'self'``
only (its template has no inline script or style).
"""

from __future__ import annotations

from drf_spectacular.views import SpectacularSwaggerSplitView

from bailing.security import CONTENT_SECURITY_POLICY

API_DOCS_CONTENT_SECURITY_POLICY = CONTENT_SECURITY_POLICY.replace("img-src 'self'", "img-src 'self' data:")


class ApiDocsView(SpectacularSwaggerSplitView):
    template_name = "api_docs.html"
    url_name = "api-schema"

    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        if "script" not in request.GET:
            response.headers["Content-Security-Policy"] = API_DOCS_CONTENT_SECURITY_POLICY
        return response

"""Plumbing views shared by every API surface: the JSON 404 and the health endpoints."""

from __future__ import annotations

from django.db import connection
from rest_framework.response import Response
from rest_framework.views import APIView

from bailing.api.errors import NotFound
from bailing.db.outage import DATABASE_RETRY_AFTER_SECONDS, mark_logged
from bailing.health import readiness


class ApiNotFound(APIView):
    """Any unknown path under /agent-api/ or /agent-auth/: JSON 404, whatever the method."""

    def initial(self, request, *args, **kwargs):
        raise NotFound()


class _HealthView(APIView):
    """Health answers are never cached, whatever they say."""

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        return response


class HealthApi(_HealthView):
    """``GET /health``, liveness: ``{"status": "ok"}`` once ``SELECT 1`` works; with the database
    unreachable, 503 ``service_unavailable`` (the exception handler's envelope)."""

    def get(self, request):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return Response({"status": "ok"})


class ReadinessApi(_HealthView):
    """``GET /health/ready``: every readiness check by name (``bailing.health``), 200 or 503."""

    def get(self, request):
        report = readiness()
        if report["status"] == "ok":
            return Response(report)
        response = Response(report, status=503)
        response["Retry-After"] = str(DATABASE_RETRY_AFTER_SECONDS)
        mark_logged(response)  # each failed check logged its own line
        return response

"""Plumbing views shared by every API surface."""

from __future__ import annotations

from django.db import connection
from rest_framework.response import Response
from rest_framework.views import APIView

from bailing.api.errors import NotFound


class ApiNotFound(APIView):
    """Any unknown path under /agent-api/ or /agent-auth/: JSON 404, whatever the method."""

    def initial(self, request, *args, **kwargs):
        raise NotFound()


class HealthApi(APIView):
    def get(self, request):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return Response({"status": "ok"})

"""Baseline endpoint for HTTP benchmarks: a bare DRF view with no database work.

Mounted only when ``BAILING_BENCH_ENDPOINTS=true`` (the benchmark command sets it for the server it
starts), so production never exposes it.
"""

from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import APIView


class BareApi(APIView):
    def get(self, request):
        return Response({"ok": True})

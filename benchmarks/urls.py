"""The baseline the benchmarks compare against, under ``/agent-api/v1/_bench/`` (the root URLconf
mounts it only when ``BAILING_BENCH_ENDPOINTS=true``)."""

from django.urls import path

from benchmarks.views import BareApi

urlpatterns = [path("bare", BareApi.as_view())]

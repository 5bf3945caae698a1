"""The baselines the benchmarks compare against, under ``/agent-api/v1/_bench/`` (the root URLconf
mounts them only when ``BAILING_BENCH_ENDPOINTS=true``): the bare endpoint and the floors
(``benchmarks/views.py``)."""

from django.urls import path

from benchmarks.views import BareApi, FloorCallApi, FloorKnowledgeApi, FloorTurnApi

urlpatterns = [
    path("bare", BareApi.as_view()),
    path("floor/knowledge", FloorKnowledgeApi.as_view()),
    path("floor/turn", FloorTurnApi.as_view()),
    path("floor/call", FloorCallApi.as_view()),
]

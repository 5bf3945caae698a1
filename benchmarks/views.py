"""Endpoints for HTTP benchmarks: the bare baseline and the floors.

Mounted only when ``BAILING_BENCH_ENDPOINTS=true`` (the benchmark command sets it for the server it
starts), so production never exposes them.

* ``bare`` — a bare DRF view with no database work: what the framework alone costs.
* ``floor/knowledge`` — what a knowledge search must cost: the query embedding and the knowledge
  base's lanes run directly (the same lane statements and settings as the search, through
  :func:`knowledge.selectors.search.knowledge_lanes_rows`), without authentication, scope, fusion,
  the freshness check of the hits, the data policy or rendering. The body is the endpoint's own (``query`` —
  or a turn's ``user_input`` — and ``limit``); the knowledge base is ``?kb=<kb_id>``.
* ``floor/turn`` — what a new turn must cost: the same retrieval when ``?kb=`` is given (``limit``
  ``?limit=``), then one durable commit of ``?rows=`` rows, the first of ``?bytes=`` bytes (the
  frozen context) into :data:`FLOOR_TABLE`.
* ``floor/call`` — what a governed read-only call must cost: the signed business request built and
  sent exactly as the hub sends it (``?provider=``, ``?tool=``, ``?subject=``; arguments are the
  body), between two durable one-row commits (the journal before, the outcome after).

Each floor is a lower bound: the real rows go to tables with more indexes, and the real endpoint has
work no floor does (authentication, the route gate, validation, the audit seal). The floors read what
they need of the configuration once per process (a knowledge base, a provider's secret and compiled
tool) and keep it; the scratch table is made and dropped by ``bailing_bench``.
"""

from __future__ import annotations

import threading
import uuid

from django.db import connection, transaction
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runtime.models import ProviderTool, ToolProvider
from agent_runtime.services.http_dispatch import dispatch_request_build, dispatch_send
from agent_runtime.services.providers import provider_secret_open
from agent_runtime.tools.compiler import CompiledTool
from knowledge.models import KnowledgeBase
from knowledge.selectors.search import knowledge_lanes_rows
from knowledge.services.providers import embedding_provider_for
from knowledge.services.retrieval import RETRIEVAL_QUERY_MAX_CHARS

# The floors' scratch table (created and dropped by bailing_bench around its runs).
FLOOR_TABLE = "bailing_bench_floor_rows"
FLOOR_TABLE_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {FLOOR_TABLE} "
    "(id bigserial PRIMARY KEY, kind smallint NOT NULL, payload text NOT NULL, "
    "at timestamptz NOT NULL DEFAULT now())"
)
FLOOR_TABLE_DROP = f"DROP TABLE IF EXISTS {FLOOR_TABLE}"
# Row sizes of a turn besides its frozen context: the conversation, the user message, the audit event.
_TURN_SMALL_ROW_BYTES = 400

_cache: dict[tuple, object] = {}
_cache_lock = threading.Lock()


def _cached(key: tuple, load):
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    value = load()
    with _cache_lock:
        _cache.setdefault(key, value)
        return _cache[key]


def _int(request, name: str, default: int) -> int:
    try:
        return max(0, int(request.query_params.get(name, default)))
    except (TypeError, ValueError):
        return default


def _retrieve(request, text: str, limit: int) -> int:
    """The floor of a search of ``limit`` hits for ``text``: the query embedding, then the lanes."""
    kb_id = request.query_params.get("kb") or ""
    kb = _cached(("kb", kb_id), lambda: KnowledgeBase.objects.get(kb_id=kb_id))
    text = text.strip()[:RETRIEVAL_QUERY_MAX_CHARS]
    vector = None
    provider = embedding_provider_for(kb)
    if provider is not None:
        vector = provider.embed([text])[0]
    return len(knowledge_lanes_rows(kb, text=text, vector=vector, limit=limit))


def _commit_rows(sizes: list[int]) -> None:
    """One durable transaction inserting one row per size (payloads of that many bytes)."""
    if not sizes:
        return
    values = ", ".join(["(%s, %s)"] * len(sizes))
    params: list[object] = []
    for kind, size in enumerate(sizes):
        params += [kind, "x" * size]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {FLOOR_TABLE} (kind, payload) VALUES {values}", params)  # noqa: S608


class BareApi(APIView):
    def get(self, request):
        return Response({"ok": True})


class FloorKnowledgeApi(APIView):
    def post(self, request):
        data = request.data
        text = str(data.get("query") or data.get("user_input") or "")
        return Response({"rows": _retrieve(request, text, int(data.get("limit") or 3))})


class FloorTurnApi(APIView):
    def post(self, request):
        rows = 0
        if request.query_params.get("kb"):
            rows = _retrieve(request, str(request.data.get("user_input") or ""), _int(request, "limit", 4))
        count = _int(request, "rows", 4)
        sizes = [_int(request, "bytes", 4096)] + [_TURN_SMALL_ROW_BYTES] * max(0, count - 1)
        _commit_rows(sizes[:count])
        return Response({"rows": rows, "committed": count})


class FloorCallApi(APIView):
    def post(self, request):
        provider_name = request.query_params.get("provider") or ""
        tool_name = request.query_params.get("tool") or ""

        def load():
            provider = ToolProvider.objects.get(name=provider_name)
            compiled = ProviderTool.objects.get(provider=provider, name=tool_name).compiled
            return (
                provider.base_url,
                provider_secret_open(provider=provider),
                CompiledTool.from_dict(compiled),
            )

        base_url, secret, tool = _cached(("call", provider_name, tool_name), load)
        subject = request.query_params.get("subject") or ""
        job_id = str(uuid.uuid4())
        outgoing = dispatch_request_build(
            tool=tool,
            arguments=dict(request.data),
            base_url=base_url,
            secret=secret,
            job_id=job_id,
            client_app_id=request.query_params.get("client") or "",
            on_behalf_of=subject,
            idempotency_key=None,
        )
        _commit_rows([200])  # the journal, before the request leaves
        outcome = dispatch_send(outgoing, timeout_ms=10000)
        _commit_rows([len(outcome.text or "")])  # the outcome
        return Response({"status": outcome.status, "kind": outcome.kind})

"""Knowledge bases as a client sees them (which one it may write to) and as the console shows them
(the list, one base, the workspaces that name each)."""

from __future__ import annotations

from django.db.models import Count, Prefetch, Q, QuerySet

from agent_runtime.config import route_effective
from agent_runtime.models import Client
from agent_runtime.selectors.workspace_overview import route_list
from bailing.api.errors import Forbidden, NotFound
from knowledge.models import KB_ID_RE, Document, KnowledgeBase

# The console's bases carry their writers as a list (``kb.writer_clients``), read by one prefetch.
_WRITERS = Prefetch("writers", to_attr="writer_clients")


def knowledge_base_writable_for_client(*, kb_id: str, client: Client) -> KnowledgeBase:
    """The knowledge base ``kb_id`` if ``client`` may push documents to it (a writer, and the base is
    enabled): else 404 ``not_found`` (unknown) or 403 ``forbidden``.

    A segment outside the kb_id pattern (a NUL byte would be a database error) names no base.
    """
    kb = knowledge_base_get(kb_id=kb_id)
    if kb is None:
        raise NotFound("Unknown knowledge base.")
    if not kb.writers.filter(pk=client.pk).exists():
        raise Forbidden("This client is not a writer of the knowledge base.")
    if not kb.enabled:
        raise Forbidden("The knowledge base is disabled.")
    return kb


def _named(queryset: QuerySet[KnowledgeBase], kb_id: str) -> KnowledgeBase | None:
    """The base ``kb_id`` of ``queryset``, or None. An id that cannot be a ``kb_id`` (a NUL byte,
    which PostgreSQL refuses in any query, or any other character outside the pattern) names no
    base and never reaches the database."""
    if KB_ID_RE.fullmatch(kb_id) is None:
        return None
    return queryset.filter(kb_id=kb_id).first()


def knowledge_base_get(*, kb_id: str) -> KnowledgeBase | None:
    return _named(KnowledgeBase.objects.all(), kb_id)


def knowledge_base_detail(*, kb_id: str) -> KnowledgeBase | None:
    """The base with its stats and its writers (``writer_clients``)."""
    return _named(KnowledgeBase.objects.select_related("stats").prefetch_related(_WRITERS), kb_id)


def knowledge_base_list() -> QuerySet[KnowledgeBase]:
    """Every base by ``kb_id``, with its stats, its writers (``writer_clients``) and its documents
    counted by status (``docs_ready``, ``docs_embedding``, ``docs_error``)."""
    return (
        KnowledgeBase.objects.select_related("stats")
        .prefetch_related(_WRITERS)
        .annotate(
            docs_ready=Count("documents", filter=Q(documents__status=Document.Status.READY)),
            docs_embedding=Count("documents", filter=Q(documents__status=Document.Status.EMBEDDING)),
            docs_error=Count("documents", filter=Q(documents__status=Document.Status.ERROR)),
        )
        .order_by("kb_id")
    )


def knowledge_base_routes() -> dict[str, list[str]]:
    """kb_id → route keys whose effective ``knowledge.kb_ids`` name it (``kb_id`` or ``kb_ids``).

    Read through ``route_effective`` so the console applies exactly the rule retrieval applies.
    Routes are configuration (tens, not thousands), so one query over all of them is fine.
    """
    result: dict[str, list[str]] = {}
    for route in route_list():
        for kb_id in route_effective(route)["knowledge"]["kb_ids"]:
            result.setdefault(kb_id, []).append(route.route_key)
    return result

"""Knowledge bases as a client sees them: which one it may write to."""

from __future__ import annotations

from agent_runtime.models import Client
from bailing.api.errors import Forbidden, NotFound
from knowledge.models import KB_ID_RE, KnowledgeBase


def knowledge_base_writable_for_client(*, kb_id: str, client: Client) -> KnowledgeBase:
    """The knowledge base ``kb_id`` if ``client`` may push documents to it (a writer, and the base is
    enabled): else 404 ``not_found`` (unknown) or 403 ``forbidden``.

    A segment outside the kb_id pattern (a NUL byte would be a database error) names no base.
    """
    kb = KnowledgeBase.objects.filter(kb_id=kb_id).first() if KB_ID_RE.fullmatch(kb_id) else None
    if kb is None:
        raise NotFound("Unknown knowledge base.")
    if not kb.writers.filter(pk=client.pk).exists():
        raise Forbidden("This client is not a writer of the knowledge base.")
    if not kb.enabled:
        raise Forbidden("The knowledge base is disabled.")
    return kb

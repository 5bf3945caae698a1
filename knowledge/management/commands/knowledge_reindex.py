"""``python manage.py knowledge_reindex KB_ID [--wait]``: index a knowledge base's documents again.

Use it after installing pgvector on a server whose documents were indexed lexically only (the
worker creates the vector table at start; this also creates the knowledge base's HNSW index), or
after a change to chunking. Every ready or failed document is queued; ``knowledge_worker`` indexes
them, or ``--wait`` runs ``knowledge_worker --once`` now. Until a document is indexed again it is
not served by search.
"""

from __future__ import annotations

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bailing.audit.actor import Actor
from knowledge.models import KnowledgeBase
from knowledge.services.documents import documents_requeue
from knowledge.vectors import vector_index_ensure, vector_storage_ensure


class Command(BaseCommand):
    help = "Queue every ready or failed document of a knowledge base for indexing again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kb_id", help="the knowledge base to re-index (its kb_id)")
        parser.add_argument("--wait", action="store_true", help="Index now (knowledge_worker --once).")

    def handle(self, *args, kb_id: str, wait: bool, **options) -> None:
        kb = KnowledgeBase.objects.filter(kb_id=kb_id).first()
        if kb is None:
            raise CommandError(f"no knowledge base {kb_id!r}")
        vectors = vector_storage_ensure()
        if vectors and kb.has_embeddings:
            vector_index_ensure(kb_pk=kb.pk, dim=kb.embedding_dim)
        count = documents_requeue(kb=kb, actor=Actor.system("knowledge_reindex"))
        lanes = "lexical + vector" if vectors and kb.has_embeddings else "lexical only"
        self.stdout.write(f"queued {count} document(s) of {kb_id} for indexing ({lanes})")
        if wait:
            call_command("knowledge_worker", "--once", stdout=self.stdout, stderr=self.stderr)

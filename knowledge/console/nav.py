"""Knowledge's entry in the console navigation and its dashboard card."""

from __future__ import annotations

from django.urls import reverse

from bailing.ui.nav import Card, NavItem
from knowledge.console.workspace import indexing_panel
from knowledge.models import Document, KnowledgeBase

NAV = [NavItem(30, "Knowledge bases", "console:knowledge_list", "knowledge.view_knowledgebase")]


def dashboard_cards(user) -> list[Card]:
    if not user.has_perm("knowledge.view_knowledgebase"):
        return []
    waiting = Document.objects.filter(status=Document.Status.EMBEDDING).count()
    failed = Document.objects.filter(status=Document.Status.ERROR).count()
    bases = KnowledgeBase.objects.count()
    return [
        Card(
            40,
            "Knowledge documents ready",
            Document.objects.filter(status=Document.Status.READY).count(),
            f"{waiting} waiting, {failed} failed, in {bases} knowledge bases",
            reverse("console:knowledge_list"),
        )
    ]


def dashboard_panels(user):
    return indexing_panel(user)

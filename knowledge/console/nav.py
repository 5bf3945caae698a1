"""Knowledge's entry in the console navigation and its dashboard card."""

from __future__ import annotations

from django.urls import reverse

from bailing.ui.nav import Card, NavItem
from knowledge.console.workspace import indexing_panel
from knowledge.selectors.overview import knowledge_counts

NAV = [NavItem(30, "Knowledge bases", "console:knowledge_list", "knowledge.view_knowledgebase")]


def dashboard_cards(user) -> list[Card]:
    if not user.has_perm("knowledge.view_knowledgebase"):
        return []
    counts = knowledge_counts()
    return [
        Card(
            40,
            "Knowledge documents ready",
            counts["ready"],
            f"{counts['waiting']} waiting, {counts['failed']} failed, in {counts['bases']} knowledge bases",
            reverse("console:knowledge_list"),
        )
    ]


def dashboard_panels(user):
    return indexing_panel(user)

"""The console home page: each app's headline counts, its health panels (tool providers, the
knowledge worker and queue, pending approvals) and what database the hub runs on."""

from __future__ import annotations

from django.conf import settings
from django.views.generic import TemplateView

from bailing.db.features import server_version, vector_available
from bailing.shell.console.nav import CONSOLE_APPS, nav_items
from bailing.ui.mixins import ConsoleView


class DashboardView(ConsoleView, TemplateView):
    """Any signed-in user may land here (it is where login leads); each app contributes its cards, and
    each card is shown only to users who may open the page it summarises, so a user without a role
    sees no figures at all."""

    template_name = "console/dashboard.html"
    permission_required = None

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        user = self.request.user
        cards = [card for app in CONSOLE_APPS for card in app.dashboard_cards(user)]
        context["cards"] = sorted(cards, key=lambda card: card.order)
        panels = [
            panel
            for app in CONSOLE_APPS
            if hasattr(app, "dashboard_panels")
            for panel in app.dashboard_panels(user)
        ]
        context["panels"] = sorted(panels, key=lambda panel: panel.order)
        context["has_role"] = any(user.has_perm(item.permission) for item in nav_items())
        if context["has_role"]:
            context["database"] = {
                "embedded": settings.BAILING_EMBEDDED_DB,
                "server_version": server_version(),
                "vector": vector_available(),
            }
        return context
